//! Pipeline tests: interface names per network namespace, conversations under getaddrinfo, and
//! frames only.
use super::*;

/// Two namespaces whose interface 2 has different names; pid 10 is in the first, 20 in the second.
struct TwoNamespaces;

impl InterfaceDirectory for TwoNamespaces {
    fn netns_of(&mut self, pid: u32) -> Option<u64> {
        Some(u64::from(pid / 10))
    }

    fn interfaces_in(&mut self, netns: u64, _pid: u32) -> BTreeMap<u32, String> {
        let name = if netns == 1 { "eth0" } else { "veth-pod" };
        BTreeMap::from([(1, "lo".to_string()), (2, name.to_string())])
    }
}

/// An `RTM_NEWROUTE` reply for 10.0.0.0/24 via interface 2 (`RTA_DST`, `RTA_OIF`).
fn route_reply(portid: u32) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&44u32.to_ne_bytes());
    m.extend_from_slice(&24u16.to_ne_bytes()); // RTM_NEWROUTE
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&portid.to_ne_bytes());
    // rtmsg: family inet, dst_len 24, src_len, tos, table main, proto kernel, scope link, unicast.
    m.extend_from_slice(&[2, 24, 0, 0, 254, 2, 253, 1]);
    m.extend_from_slice(&0u32.to_ne_bytes()); // rtm_flags
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&1u16.to_ne_bytes()); // RTA_DST
    m.extend_from_slice(&[10, 0, 0, 0]);
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&4u16.to_ne_bytes()); // RTA_OIF
    m.extend_from_slice(&2u32.to_ne_bytes());
    m
}

fn frame_from(pid: u32, bytes: Vec<u8>) -> NetlinkFrame {
    NetlinkFrame {
        wall_ns: 0,
        ts_ns: 0,
        protocol: 0,
        direction: Some(Direction::Recv),
        task: Some(Task {
            pid,
            tid: pid,
            comm: "ip".into(),
        }),
        netns: 0,
        total_len: bytes.len() as u32,
        bytes,
    }
}

fn route_devs(out: &[Emitted]) -> Vec<String> {
    out.iter()
        .filter_map(|e| match &e.event()?.body {
            EventBody::Netlink(n) => match &n.messages[0].body {
                crate::model::netlink::MessageBody::Route(r) => {
                    r.oif_name.as_deref().map(String::from)
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn interface_names_come_from_each_process_namespace() {
    let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default())
        .with_interface_directory(Box::new(TwoNamespaces));
    let mut out = Vec::new();
    pipeline.on_frame(frame_from(10, route_reply(10)), &mut out);
    pipeline.on_frame(frame_from(20, route_reply(20)), &mut out);
    pipeline.on_frame(frame_from(11, route_reply(11)), &mut out);
    assert_eq!(route_devs(&out), ["eth0", "veth-pod", "eth0"]);
}

/// A namespace whose interface 2 is made after its table was first loaded (the first load has
/// `lo` only); counts the loads.
struct InterfaceMadeLater {
    loads: std::rc::Rc<std::cell::Cell<u32>>,
}

impl InterfaceDirectory for InterfaceMadeLater {
    fn netns_of(&mut self, _pid: u32) -> Option<u64> {
        Some(7)
    }

    fn interfaces_in(&mut self, _netns: u64, _pid: u32) -> BTreeMap<u32, String> {
        self.loads.set(self.loads.get() + 1);
        let mut names = BTreeMap::from([(1, "lo".to_string())]);
        if self.loads.get() > 1 {
            names.insert(2, "vb0".to_string());
        }
        names
    }
}

#[test]
fn an_interface_made_after_its_namespace_was_first_seen_is_named_from_a_reload() {
    let loads = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default())
        .with_interface_directory(Box::new(InterfaceMadeLater {
            loads: loads.clone(),
        }));
    let mut out = Vec::new();
    pipeline.on_frame(frame_from(10, route_reply(10)), &mut out);
    assert_eq!(route_devs(&out), ["vb0"]);
    assert_eq!(
        loads.get(),
        2,
        "first sight, then one reload for the missing name"
    );
    // Named now: no further load.
    pipeline.on_frame(frame_from(10, route_reply(10)), &mut out);
    assert_eq!(route_devs(&out), ["vb0", "vb0"]);
    assert_eq!(loads.get(), 2);
}

#[test]
fn a_name_no_reload_finds_is_looked_for_at_most_once_a_second() {
    struct OnlyLo(std::rc::Rc<std::cell::Cell<u32>>);
    impl InterfaceDirectory for OnlyLo {
        fn netns_of(&mut self, _pid: u32) -> Option<u64> {
            Some(7)
        }
        fn interfaces_in(&mut self, _netns: u64, _pid: u32) -> BTreeMap<u32, String> {
            self.0.set(self.0.get() + 1);
            BTreeMap::from([(1, "lo".to_string())])
        }
    }
    let loads = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default())
        .with_interface_directory(Box::new(OnlyLo(loads.clone())));
    let mut out = Vec::new();
    for _ in 0..100 {
        pipeline.on_frame(frame_from(10, route_reply(10)), &mut out);
    }
    assert!(route_devs(&out).is_empty());
    assert_eq!(
        loads.get(),
        2,
        "first sight and one reload within the second"
    );
}

#[test]
fn without_a_directory_one_table_serves_all() {
    let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default());
    pipeline.netlink_decoder().set_interface_name(2, "eth0");
    let mut out = Vec::new();
    pipeline.on_frame(frame_from(0, route_reply(5)), &mut out);
    assert_eq!(route_devs(&out), ["eth0"]);
}

#[test]
fn frames_only_makes_the_frame_and_no_event() {
    let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default());
    pipeline.make_frames_only();
    let mut out = Vec::new();
    let bytes = route_reply(5);
    pipeline.on_frame(frame_from(10, bytes.clone()), &mut out);
    pipeline.finish(&mut out);
    assert_eq!(out.len(), 1, "one frame and nothing else");
    match &out[0] {
        Emitted::Frame(f) => assert_eq!(f.bytes, bytes),
        _ => panic!("not a frame"),
    }
}

#[test]
fn frames_only_still_blanks_ipsec_keys() {
    let mut full = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default());
    let mut frames_only = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default());
    frames_only.make_frames_only();
    let mut xfrm = frame_from(10, route_reply(5));
    xfrm.protocol = crate::decode::netlink::NETLINK_XFRM;
    let framed = |pipeline: &mut Pipeline| {
        let mut out = Vec::new();
        pipeline.on_frame(xfrm.clone(), &mut out);
        out.into_iter()
            .find_map(|e| match e {
                Emitted::Frame(f) => Some(f.bytes),
                _ => None,
            })
            .unwrap()
    };
    let (a, b) = (framed(&mut full), framed(&mut frames_only));
    assert_eq!(a, b);
    assert!(a[16..].iter().all(|&b| b == 0), "body blanked: {a:?}");
    assert_eq!(a[..16], xfrm.bytes[..16], "header kept");
}
