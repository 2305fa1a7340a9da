use super::*;

#[test]
fn pretty_json_reparses_to_the_same_value() {
    let text = br#"{"a":[1,{"b":"x\"y","c":[]}],"d":{},"e":null,"f":true}"#;
    let v = json::parse(text).unwrap();
    let pretty = pretty_json(&v);
    assert!(pretty.starts_with("{\n  \"a\": [\n    1,"), "{pretty}");
    assert_eq!(json::parse(pretty.as_bytes()).unwrap(), v);
}

#[test]
fn tables_align_and_type_their_json() {
    let mut t = Table::new(&[("NAME", "name"), ("N", "n")]);
    t.push(vec![s("long-name"), Cell::Int(1)]);
    t.push(vec![s("x"), Cell::None]);
    assert_eq!(t.render(), "NAME       N\nlong-name  1\nx          -\n");
    assert_eq!(
        t.emit(true),
        "[{\"name\":\"long-name\",\"n\":1},{\"name\":\"x\",\"n\":null}]\n"
    );
}
