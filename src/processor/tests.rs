use super::*;

#[test]
fn refusals_are_answered_with_javas_codes_and_shapes() {
    let unknown = Refusal::Parse(ParseError::NotSupported(31)).reply();
    assert_eq!(unknown.code, response::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        unknown.remark.as_deref(),
        Some(" request type 31 not supported")
    );
    let missing = Refusal::Parse(ParseError::MissingField("topic")).reply();
    assert_eq!(missing.code, response::SYSTEM_ERROR);
    // Java's full unregistration queue: SYSTEM_ERROR, no remark, no ext fields.
    let full = Refusal::UnregisterQueueFull.reply();
    assert_eq!((full.code, full.remark), (response::SYSTEM_ERROR, None));
    assert!(matches!(full.ext, ReplyExt::None));
    // Handlers with a response header answer `"extFields":{}` even when refusing.
    for refusal in [
        Refusal::CrcMismatch,
        Refusal::NoKvItem {
            namespace: "NS".into(),
            key: "k".into(),
        },
    ] {
        assert!(matches!(refusal.reply().ext, ReplyExt::Pairs(p) if p.is_empty()));
    }
    let busy = Refusal::Kv(KvRefusal::Busy {
        waiting: 2,
        limit: 1,
    });
    assert_eq!(busy.reply().code, response::SYSTEM_BUSY);
    let full = Refusal::Kv(KvRefusal::TooManyEntries { limit: 1 });
    assert_eq!(full.reply().code, response::SYSTEM_ERROR);
    let overloaded = Refusal::Overloaded.reply();
    assert_eq!(overloaded.code, response::SYSTEM_BUSY);
    assert_eq!(overloaded.remark.as_deref(), Some(OVERLOAD_REMARK));
}
