//! The snapshot from the kernel's messages, and the route model.
use super::*;
use crate::model::netlink::{AddressBody, MessageHeader, RouteBody};

/// A message of the rtnetlink type `type_name` (its number as the kernel sends it).
fn message(type_name: &'static str, body: MessageBody) -> NetlinkMessage {
    let type_id = match type_name {
        "RTM_NEWLINK" => 16,
        "RTM_DELLINK" => 17,
        "RTM_NEWADDR" => 20,
        "RTM_DELADDR" => 21,
        "RTM_NEWROUTE" => 24,
        "RTM_DELROUTE" => 25,
        other => panic!("no type number for {other} here"),
    };
    NetlinkMessage {
        header: MessageHeader {
            type_name: type_name.into(),
            type_id,
            flags: vec![],
            flags_raw: 0,
            seq: 0,
            pid: 0,
            len: 0,
        },
        body,
        error: None,
    }
}

fn address(ifname: &str, local: &str, prefix_len: u8) -> MessageBody {
    MessageBody::Address(Box::new(AddressBody {
        family: "inet".into(),
        prefix_len,
        ifname: Some(ifname.into()),
        local: Some(local.into()),
        ..Default::default()
    }))
}

fn link(index: u32, name: &str, flags_raw: u32) -> MessageBody {
    MessageBody::Link(Box::new(LinkBody {
        index,
        ifname: Some(name.into()),
        flags_raw,
        ..Default::default()
    }))
}

#[test]
fn messages_update_in_place_delete_and_keep_an_address_held_twice() {
    let messages = [
        message("RTM_NEWLINK", link(1, "lo", 0x9)),
        message("RTM_NEWLINK", link(2, "eth0", 0x1003)),
        message("RTM_NEWLINK", link(3, "eth1", 0x1002)),
        message("RTM_NEWADDR", address("eth0", "10.0.0.10", 24)),
        message("RTM_NEWADDR", address("eth1", "10.0.0.10", 24)),
        message("RTM_NEWADDR", address("eth0", "10.0.0.99", 24)),
        message("RTM_DELADDR", address("eth0", "10.0.0.99", 24)),
        // eth0 goes down: it stays second in the link order.
        message("RTM_NEWLINK", link(2, "eth0", 0x1002)),
        message(
            "RTM_NEWROUTE",
            MessageBody::Route(Box::new(RouteBody {
                family: "inet6".into(),
                table: "main".into(),
                route_type: "unicast".into(),
                gateway: Some("fe80::1".into()),
                oif_name: Some("eth0".into()),
                ..Default::default()
            })),
        ),
        message(
            "RTM_NEWROUTE",
            MessageBody::Route(Box::new(RouteBody {
                family: "inet".into(),
                table: "main".into(),
                route_type: "unicast".into(),
                dst: Some("192.0.2.1".into()),
                dst_len: 32,
                flags: vec!["CLONED".into()],
                ..Default::default()
            })),
        ),
    ];
    let s = NodeSnapshot::from_messages("n", vec![], &messages);
    let links: Vec<(&str, Option<bool>, Option<bool>)> = s
        .links
        .iter()
        .map(|l| (l.ifname.as_deref().unwrap(), l.up, l.loopback))
        .collect();
    assert_eq!(
        links,
        [
            ("lo", Some(true), Some(true)),
            ("eth0", Some(false), Some(false)),
            ("eth1", Some(false), Some(false))
        ]
    );
    let addresses: Vec<(&str, &str)> = s
        .addresses
        .iter()
        .map(|a| (a.ifname.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(addresses, [("eth0", "10.0.0.10"), ("eth1", "10.0.0.10")]);
    let routes: Vec<&str> = s.routes.iter().map(|r| r.dst.as_str()).collect();
    assert_eq!(
        routes,
        ["::/0"],
        "an IPv6 default is ::/0; a lookup's answer is no route"
    );
}

#[test]
fn route_get_takes_the_first_of_routes_with_one_prefix_and_keeps_families_apart() {
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth1", "10.0.0.20/24")
        .addr("eth1", "fd00::20/64")
        .default_via("10.0.0.1", "eth0")
        .done();
    let r = s.route_get(ip("10.0.0.77")).unwrap();
    assert_eq!(
        (r.dev.as_str(), r.src, r.tied_devs.as_slice()),
        ("eth0", Some(ip("10.0.0.10")), &["eth1".to_string()][..])
    );
    // An IPv4 default does not route IPv6.
    assert_eq!(s.route_get(ip("2001:db8::1")), None);
    assert_eq!(s.route_get(ip("fd00::99")).unwrap().dev, "eth1");
}
