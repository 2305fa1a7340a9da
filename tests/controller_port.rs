//! The controller's listener on the name server's loop, over TCP: which port answers what,
//! the bound port announced, config requests, a stop that answers what is in flight.
#![cfg(feature = "controller")]

mod common;
mod controller_net;

use controller_net::ControllerServer;
use rmq_namesrv::client::Client;

const CONTROLLER_CODES: [i32; 12] = [
    1001, 1002, 1003, 1004, 1005, 1006, 1009, 1010, 1011, 1012, 1013, 1007,
];

#[test]
fn the_name_server_port_answers_controller_codes_with_3_and_the_controller_port_answers_them() {
    let server = ControllerServer::start(&[]);
    let mut ns = server.namesrv_client();
    for code in CONTROLLER_CODES {
        let resp = ns.request(code, &[], b"").expect("answer");
        assert_eq!(resp.code, 3, "name-server port, code {code}");
    }
    let mut ctrl = server.controller_client();
    let resp = ctrl.request(1005, &[], b"").expect("1005");
    assert_eq!(resp.code, 0);
    assert_eq!(
        resp.ext("controllerLeaderAddress"),
        Some(server.controller.as_str())
    );
    assert_eq!(resp.ext("controllerLeaderId"), Some("n0"));
    assert_eq!(resp.ext("isLeader"), Some("true"));
    assert_eq!(resp.ext("group"), Some("group1"));
    assert_eq!(
        resp.ext("peers"),
        Some(format!("n0:{};", server.controller).as_str())
    );
    // The controller port is not a name server: its codes only.
    let resp = ctrl
        .request(105, &[("topic", "TBW102")], b"")
        .expect("answer");
    assert_eq!(
        (resp.code, resp.remark.as_deref()),
        (3, Some(" request type 105 not supported"))
    );
    // GET_NAMESRV_CONFIG says the controller runs.
    let config = ns.get_namesrv_config().expect("config");
    assert!(config.contains(&("enableControllerInNamesrv".to_string(), "true".to_string())));
}

#[test]
fn config_requests_on_the_controller_port() {
    let server = ControllerServer::start(&[("electMasterMaxRetryCount", "5")]);
    let mut ctrl = server.controller_client();
    let text = |c: &mut Client| {
        let resp = c.request(1010, &[], b"").expect("1010");
        assert_eq!(resp.code, 0);
        String::from_utf8(resp.body.to_vec()).expect("text")
    };
    let before = text(&mut ctrl);
    assert!(
        before.contains("\nelectMasterMaxRetryCount=5\n"),
        "{before}"
    );
    // The bound port, not the configured 0.
    assert!(
        before.contains(&format!(
            "\ncontrollerDLegerPeers=n0-{}\n",
            server.controller
        )),
        "{before}"
    );
    let resp = ctrl
        .request(1009, &[], b"electMasterMaxRetryCount=2\n")
        .expect("1009");
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert!(text(&mut ctrl).contains("\nelectMasterMaxRetryCount=2\n"));
    let resp = ctrl
        .request(1009, &[], b"configStorePath=/tmp/x\n")
        .expect("1009");
    assert_eq!(
        (resp.code, resp.remark.as_deref()),
        (16, Some("Can not update config in black list."))
    );
    // It survives a restart (kept in the store, applied over the settings given at start).
    let dir = server.stop();
    let server = ControllerServer::start_in(dir, &[("electMasterMaxRetryCount", "5")]);
    assert!(text(&mut server.controller_client()).contains("\nelectMasterMaxRetryCount=2\n"));
}

/// Java's GET_CONTROLLER_CONFIG keys for a name server started with Java's quick-start file
/// (`enableControllerInNamesrv` and the three DLedger keys): its `ControllerConfig` fields
/// (28, `controllerDLegerGroup` because it is set), its `NettyServerConfig` fields (18) and
/// the one key of the file that is neither.
const JAVA_GET_CONTROLLER_CONFIG_KEYS: [&str; 47] = [
    // ControllerConfig
    "configBlackList",
    "configStorePath",
    "controllerDLegerGroup",
    "controllerDLegerPeers",
    "controllerDLegerSelfId",
    "controllerRequestThreadPoolQueueCapacity",
    "controllerStorePath",
    "controllerThreadPoolNums",
    "controllerType",
    "electMasterMaxRetryCount",
    "enableElectUncleanMaster",
    "isProcessReadEvent",
    "jraftConfig",
    "mappedFileSize",
    "metricGrpcExporterIntervalInMills",
    "metricGrpcExporterTimeOutInMills",
    "metricLoggingExporterIntervalInMills",
    "metricsExporterType",
    "metricsGrpcExporterHeader",
    "metricsGrpcExporterTarget",
    "metricsInDelta",
    "metricsLabel",
    "metricsPromExporterHost",
    "metricsPromExporterPort",
    "notifyBrokerRoleChanged",
    "rocketmqHome",
    "scanInactiveMasterInterval",
    "scanNotActiveBrokerInterval",
    // NettyServerConfig (the controller's copy of the name server's)
    "bindAddress",
    "enableShutdownGracefully",
    "listenPort",
    "serverAsyncSemaphoreValue",
    "serverCallbackExecutorThreads",
    "serverChannelMaxIdleTimeSeconds",
    "serverNettyWorkerGroupEnable",
    "serverOnewaySemaphoreValue",
    "serverPooledByteBufAllocatorEnable",
    "serverSelectorThreads",
    "serverSocketBacklog",
    "serverSocketRcvBufSize",
    "serverSocketSndBufSize",
    "serverWorkerThreads",
    "shutdownWaitTimeSeconds",
    "useEpollNativeSelector",
    "writeBufferHighWaterMark",
    "writeBufferLowWaterMark",
    // The config file's
    "enableControllerInNamesrv",
];

#[test]
fn get_controller_config_answers_the_keys_java_answers() {
    let server = ControllerServer::start(&[]);
    let mut ctrl = server.controller_client();
    let text = |c: &mut Client| {
        let resp = c.request(1010, &[], b"").expect("1010");
        assert_eq!(resp.code, 0);
        String::from_utf8(resp.body.to_vec()).expect("text")
    };
    let before = text(&mut ctrl);
    let keys: std::collections::BTreeSet<&str> = before
        .lines()
        .map(|l| l.split_once('=').map_or(l, |(k, _)| k))
        .collect();
    let java: std::collections::BTreeSet<&str> =
        JAVA_GET_CONTROLLER_CONFIG_KEYS.into_iter().collect();
    assert_eq!(keys, java, "{before}");
    let port = server.controller.rsplit_once(':').unwrap().1;
    for line in [
        "isProcessReadEvent=false".to_string(),
        format!("listenPort={port}"),
        "metricsLabel=".into(),
        "serverWorkerThreads=8".into(),
        "enableControllerInNamesrv=true".into(),
    ] {
        assert!(before.lines().any(|l| l == line), "{line} in\n{before}");
    }
    // The key that sets it stays `processReadEvent`, as in Java.
    let resp = ctrl
        .request(1009, &[], b"processReadEvent=true\n")
        .expect("1009");
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    assert!(text(&mut ctrl)
        .lines()
        .any(|l| l == "isProcessReadEvent=true"));
    // rmq-namesrv's own keys are shown once set, as Java shows a key its config file sets.
    let server = ControllerServer::start(&[("controllerSnapshotEvents", "500")]);
    let after = text(&mut server.controller_client());
    assert!(
        after.lines().any(|l| l == "controllerSnapshotEvents=500"),
        "{after}"
    );
}

#[test]
fn writes_in_flight_at_a_stop_are_answered_and_survive_the_restart() {
    const WRITES: i32 = 100;
    let server = ControllerServer::start(&[]);
    let mut ctrl = server.controller_client();
    // One burst: the server reads it whole, so when the first answer is back every request
    // is in the controller's pipeline, waiting for its fsync.
    let mut burst = Vec::new();
    for i in 1..=WRITES {
        burst.extend(common::apply_frame(i, &format!("set-{i}")));
    }
    ctrl.send_raw(&burst).expect("send");
    assert_eq!(ctrl.read_response(1).expect("first answer").code, 0);
    let dir = server.stop();
    for i in 2..=WRITES {
        let resp = ctrl
            .read_response(i)
            .unwrap_or_else(|e| panic!("write {i} in flight at the stop got no answer: {e}"));
        assert_eq!(resp.code, 0, "write {i}: {:?}", resp.remark);
    }
    let server = ControllerServer::start_in(dir, &[]);
    let mut ctrl = server.controller_client();
    for i in 1..=WRITES {
        let name = format!("set-{i}");
        let resp = ctrl
            .request(1012, &[("clusterName", "c"), ("brokerName", &name)], b"")
            .expect("1012");
        assert_eq!(
            resp.ext("nextBrokerId"),
            Some("2"),
            "{name} after the restart"
        );
    }
}
