//! The shapes of a route-get burst written by hand, as their `Serialize` writes them: a netlink
//! message with a route body, a route lookup's members, a conversation's route facts.
//!
//! Under a route-get burst every reply and every request is a route message: through the
//! derived `Serialize` (header, the internally tagged body, twenty-odd route fields) they were
//! a tenth of the live consumer's CPU. Here the names of the decoder's tables are copied
//! without looking for characters to escape, and nothing goes through serde's per-field calls.
//! Other shapes, rarer, keep the derived path. Tests compare both with serde_json over every
//! optional field present and absent.
use compact_str::CompactString;

use super::compact::{
    self, append_integer, append_member_key as append_key, append_str, append_table_name, JsonError,
};
use crate::model::event::RouteLookup;
use crate::model::facts::{ConversationFacts, RouteFact};
use crate::model::netlink::attributes::append_hex_digits;
use crate::model::netlink::{Hex, MessageBody, Name, NetlinkMessage, RawAttribute, RouteBody};

/// Appends `message` as serde_json writes it.
pub(super) fn append_message(message: &NetlinkMessage, out: &mut Vec<u8>) -> Result<(), JsonError> {
    let MessageBody::Route(route) = &message.body else {
        return compact::append_json(message, out);
    };
    let h = &message.header;
    out.extend_from_slice(b"{\"type\":");
    append_table_name(out, &h.type_name);
    append_key(out, "type_id");
    append_integer(out, h.type_id);
    append_key(out, "flags");
    append_names(out, &h.flags);
    append_key(out, "flags_raw");
    append_integer(out, h.flags_raw);
    append_key(out, "seq");
    append_integer(out, h.seq);
    append_key(out, "pid");
    append_integer(out, h.pid);
    append_key(out, "len");
    append_integer(out, h.len);
    out.extend_from_slice(b",\"body\":{\"kind\":\"route\"");
    append_route_members(route, out)?;
    out.push(b'}');
    if let Some(error) = &message.error {
        append_key(out, "error");
        append_str(out, error);
    }
    out.push(b'}');
    Ok(())
}

/// `["NAME",…]`.
fn append_names(out: &mut Vec<u8>, names: &[Name]) {
    out.push(b'[');
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        append_table_name(out, name);
    }
    out.push(b']');
}

/// `,"key":"text"` when `text` is present.
fn append_optional_text(out: &mut Vec<u8>, key: &'static str, text: &Option<CompactString>) {
    if let Some(text) = text {
        append_key(out, key);
        append_str(out, text);
    }
}

/// `,"key":N` when `number` is present.
fn append_optional_number(out: &mut Vec<u8>, key: &'static str, number: Option<u32>) {
    if let Some(number) = number {
        append_key(out, key);
        append_integer(out, number);
    }
}

/// The members of a route body, in its fields' order, after `kind`.
fn append_route_members(r: &RouteBody, out: &mut Vec<u8>) -> Result<(), JsonError> {
    for (key, name) in [("family", &r.family), ("table", &r.table)] {
        append_key(out, key);
        append_table_name(out, name);
    }
    append_key(out, "table_id");
    append_integer(out, r.table_id);
    for (key, name) in [
        ("type", &r.route_type),
        ("protocol", &r.protocol),
        ("scope", &r.scope),
    ] {
        append_key(out, key);
        append_table_name(out, name);
    }
    append_key(out, "tos");
    append_integer(out, r.tos);
    append_optional_text(out, "dst", &r.dst);
    append_key(out, "dst_len");
    append_integer(out, r.dst_len);
    append_optional_text(out, "src", &r.src);
    append_key(out, "src_len");
    append_integer(out, r.src_len);
    append_optional_text(out, "prefsrc", &r.prefsrc);
    append_optional_text(out, "gateway", &r.gateway);
    append_optional_number(out, "oif", r.oif);
    append_optional_text(out, "oif_name", &r.oif_name);
    append_optional_number(out, "iif", r.iif);
    append_optional_text(out, "iif_name", &r.iif_name);
    append_optional_number(out, "priority", r.priority);
    append_optional_number(out, "mark", r.mark);
    append_key(out, "flags");
    append_names(out, &r.flags);
    append_key(out, "flags_raw");
    append_integer(out, r.flags_raw);
    if !r.other_attributes.is_empty() {
        append_key(out, "other_attributes");
        append_raw_attributes(out, &r.other_attributes)?;
    }
    Ok(())
}

/// `[{"type":N,"nested":true,"hex":"…"},…]` (`nested` only when set).
fn append_raw_attributes(out: &mut Vec<u8>, attributes: &[RawAttribute]) -> Result<(), JsonError> {
    out.push(b'[');
    for (i, attribute) in attributes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"type\":");
        append_integer(out, attribute.attr_type);
        if attribute.nested {
            out.extend_from_slice(b",\"nested\":true");
        }
        append_key(out, "hex");
        append_hex(out, &attribute.hex)?;
        out.push(b'}');
    }
    out.push(b']');
    Ok(())
}

/// A [`Hex`] value, as its `Serialize` writes it.
fn append_hex(out: &mut Vec<u8>, hex: &Hex) -> Result<(), JsonError> {
    match hex {
        // Hex digits need no escape.
        Hex::Bytes(bytes) => {
            out.push(b'"');
            append_hex_digits(bytes, out);
            out.push(b'"');
            Ok(())
        }
        Hex::Text(_) => compact::append_json(hex, out),
    }
}

/// `"text"`, or `null`.
fn append_optional_str(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => append_str(out, text),
        None => out.extend_from_slice(b"null"),
    }
}

/// The members of a `route_lookup` body, after `kind`.
pub(super) fn append_route_lookup_members(r: &RouteLookup, out: &mut Vec<u8>) {
    append_key(out, "family");
    append_table_name(out, &r.family);
    append_key(out, "dst");
    append_str(out, &r.dst);
    append_key(out, "src");
    append_str(out, &r.src);
    append_key(out, "table");
    append_table_name(out, &r.table);
    append_key(out, "type");
    match &r.route_type {
        Some(name) => append_table_name(out, name),
        None => out.extend_from_slice(b"null"),
    }
    append_key(out, "oif");
    append_str(out, &r.oif);
    append_key(out, "gateway");
    append_optional_str(out, r.gateway.as_deref());
    append_key(out, "err");
    append_integer(out, r.err);
}

/// A conversation's `facts`: by hand when they are routes alone (a route get's), else by
/// their derived `Serialize`.
pub(super) fn append_facts(f: &ConversationFacts, out: &mut Vec<u8>) -> Result<(), JsonError> {
    let routes_alone = f.addresses.is_empty()
        && f.links.is_empty()
        && f.families.is_empty()
        && f.ipvs.is_empty()
        && f.omitted == 0;
    if !routes_alone {
        return compact::append_json(f, out);
    }
    if f.routes.is_empty() {
        out.extend_from_slice(b"{}");
        return Ok(());
    }
    out.extend_from_slice(b"{\"routes\":[");
    for (i, route) in f.routes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        append_route_fact(route, out);
    }
    out.extend_from_slice(b"]}");
    Ok(())
}

/// One route of an answer.
fn append_route_fact(r: &RouteFact, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"table\":");
    append_table_name(out, &r.table);
    append_key(out, "type");
    append_table_name(out, &r.route_type);
    append_key(out, "dst");
    append_str(out, &r.dst);
    append_optional_text(out, "dev", &r.dev);
    append_optional_text(out, "src", &r.src);
    append_optional_text(out, "gateway", &r.gateway);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::netlink::MessageHeader;

    fn header(flags: Vec<Name>) -> MessageHeader {
        MessageHeader {
            type_name: "RTM_NEWROUTE".into(),
            type_id: 24,
            flags,
            flags_raw: 0x22,
            seq: 1_795_785_744,
            pid: 18298,
            len: 104,
        }
    }

    /// A route body with every optional member present.
    fn full_route() -> RouteBody {
        RouteBody {
            family: "inet6".into(),
            table: Name::Owned("1000".into()),
            table_id: 1000,
            route_type: "unicast".into(),
            protocol: "kernel".into(),
            scope: "global".into(),
            tos: 4,
            dst: Some("2001:db8::1".into()),
            dst_len: 128,
            src: Some("2001:db8::2".into()),
            src_len: 64,
            prefsrc: Some("2001:db8::3".into()),
            gateway: Some("fe80::1".into()),
            oif: Some(3),
            oif_name: Some("eth\"0\\\u{1}".into()),
            iif: Some(4),
            iif_name: Some("veth1".into()),
            priority: Some(1024),
            mark: Some(u32::MAX),
            flags: vec!["CLONED".into(), Name::Owned("0x40000000".into())],
            flags_raw: 0x4000_0200,
            other_attributes: vec![
                RawAttribute {
                    attr_type: 25,
                    nested: false,
                    hex: Hex::Bytes(vec![0; 4]),
                },
                RawAttribute {
                    attr_type: 8,
                    nested: true,
                    hex: Hex::Bytes((0..=255).collect()),
                },
                RawAttribute {
                    attr_type: 12,
                    nested: false,
                    hex: Hex::Text("not hex \"at all\"".into()),
                },
            ],
        }
    }

    /// Route lookups of both families, with and without type and gateway, and names to escape.
    #[test]
    fn route_lookups_are_written_as_serde_json_writes_them() {
        let full = RouteLookup {
            family: "inet6".into(),
            dst: "2001:db8::1".into(),
            src: "::".into(),
            table: Name::Owned("1000".into()),
            route_type: Some("unicast".into()),
            oif: "eth\"0".into(),
            gateway: Some("fe80::1".into()),
            err: -11,
        };
        let bare = RouteLookup {
            family: "inet".into(),
            dst: "10.9.0.2".into(),
            src: "0.0.0.0".into(),
            table: "main".into(),
            route_type: None,
            oif: "-".into(),
            gateway: None,
            err: 0,
        };
        for lookup in [full, bare] {
            let mut ours = b"{\"kind\":\"route_lookup\"".to_vec();
            append_route_lookup_members(&lookup, &mut ours);
            ours.push(b'}');
            // The body as the event writes it: `kind`, then the members in the struct's order.
            let body = crate::model::event::EventBody::RouteLookup(Box::new(lookup));
            let theirs = serde_json::to_string(&body).unwrap();
            assert_eq!(String::from_utf8(ours).unwrap(), theirs);
        }
    }

    /// Facts of routes alone (none, one with every optional member, one with none), and facts
    /// of other kinds (the derived path).
    #[test]
    fn facts_are_written_as_serde_json_writes_them() {
        let route = |optional: bool| RouteFact {
            table: "main".into(),
            route_type: Name::Owned("unicast".into()),
            dst: "10.9.0.2/32".into(),
            dev: optional.then(|| "veth\\0".into()),
            src: optional.then(|| "10.9.0.1".into()),
            gateway: optional.then(|| "10.9.0.254".into()),
        };
        let mut facts = vec![
            ConversationFacts::default(),
            ConversationFacts {
                routes: vec![route(true), route(false)],
                ..Default::default()
            },
            ConversationFacts {
                routes: vec![route(false)],
                omitted: 3,
                ..Default::default()
            },
        ];
        facts.push(ConversationFacts {
            links: vec![crate::model::facts::LinkFact {
                index: 2,
                ifname: Some("eth0".into()),
                kind: None,
            }],
            ..facts[1].clone()
        });
        for f in &facts {
            let mut ours = Vec::new();
            append_facts(f, &mut ours).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(f).unwrap()
            );
        }
    }

    /// Every shape of a route message: each optional member alone absent, none present,
    /// empty and owned flag names, with and without the message's `error`; and a message of
    /// another kind (the derived path).
    #[test]
    fn route_messages_are_written_as_serde_json_writes_them() {
        let full = full_route();
        let mut routes = vec![full.clone(), RouteBody::default()];
        let without: [fn(&mut RouteBody); 11] = [
            |r| r.dst = None,
            |r| r.src = None,
            |r| r.prefsrc = None,
            |r| r.gateway = None,
            |r| r.oif = None,
            |r| r.oif_name = None,
            |r| r.iif = None,
            |r| r.iif_name = None,
            |r| r.priority = None,
            |r| r.mark = None,
            |r| r.other_attributes.clear(),
        ];
        for remove in without {
            let mut r = full.clone();
            remove(&mut r);
            routes.push(r);
        }
        let mut messages = Vec::new();
        for route in routes {
            for flags in [vec![], vec!["REQUEST".into(), Name::Owned("0x8000".into())]] {
                for error in [None, Some("attribute 3: \"bad\"\n".to_string())] {
                    messages.push(NetlinkMessage {
                        header: header(flags.clone()),
                        body: MessageBody::Route(Box::new(route.clone())),
                        error,
                    });
                }
            }
        }
        messages.push(NetlinkMessage {
            header: header(vec![]),
            body: MessageBody::Empty,
            error: None,
        });
        for message in &messages {
            let mut ours = Vec::new();
            append_message(message, &mut ours).unwrap();
            let theirs = serde_json::to_vec(message).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(theirs).unwrap()
            );
        }
    }
}
