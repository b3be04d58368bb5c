//! Regression (found by the strace cross-check work): the netlink decoder once kept one interface
//! index → name map for the whole trace, learned from any process's RTM_NEWLINK, in any network
//! namespace. Interface indexes are per namespace, so a route reply in namespace B is labelled
//! with the name the same index has in namespace A. Now each record carries the kernel's netns
//! id and the pipeline keeps one name table per namespace.
use nodeip_trace_tests::{require_root, trace_json, Netns};

#[test]
fn route_replies_name_the_interface_of_their_own_namespace() {
    require_root();
    let a = Netns::new("ifa");
    let a_peer = Netns::new("ifap");
    let b = Netns::new("ifb");
    let b_peer = Netns::new("ifbp");
    // Index 2 in both namespaces, with different names.
    a.veth_to("va0", &a_peer, "pa0");
    b.veth_to("vb0", &b_peer, "pb0");
    b.ip(&["addr", "add", "198.51.100.1/24", "dev", "vb0"]);
    let script = format!(
        "ip -n {} link show >/dev/null && ip -n {} route get 198.51.100.9 >/dev/null",
        a.name, b.name
    );
    let run = trace_json(&[], &["sh", "-c", &script]);
    assert!(run.output.status.success(), "{}", run.stderr);
    let reply = run
        .of_kind("netlink")
        .into_iter()
        .flat_map(|e| e["messages"].as_array().unwrap().iter())
        .find(|m| m["type"] == "RTM_NEWROUTE")
        .cloned()
        .expect("the route reply");
    assert_eq!(reply["body"]["dst"], "198.51.100.9");
    assert_eq!(reply["body"]["oif_name"], "vb0", "{reply:#}");
}
