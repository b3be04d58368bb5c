//! Generic netlink: the 4-byte genl header, message naming by family and command, and the
//! controller family nlctrl (`CTRL_CMD_GETFAMILY`/`NEWFAMILY`), whose replies teach the
//! decoder dynamic family ids such as IPVS's. IPVS bodies are handed to `ipvs`.

use super::attributes::{bit_names, collect_attributes, walk_attributes, Attribute};
use super::{ipvs, DecodeError, NetlinkDecoder};
use crate::model::netlink::{
    GenlBody, GenlOperation, Hex, McastGroup, MessageBody, MessageDetail, Name, NlctrlBody,
};

/// nlctrl's family name.
pub(crate) const NLCTRL_NAME: &str = "nlctrl";
/// `struct genlmsghdr`: cmd, version, reserved u16.
const GENL_HDRLEN: usize = 4;

/// nlctrl commands (`CTRL_CMD_*`), by number.
const CTRL_COMMANDS: &[&str] = &[
    "CTRL_CMD_UNSPEC",
    "CTRL_CMD_NEWFAMILY",
    "CTRL_CMD_DELFAMILY",
    "CTRL_CMD_GETFAMILY",
    "CTRL_CMD_NEWOPS",
    "CTRL_CMD_DELOPS",
    "CTRL_CMD_GETOPS",
    "CTRL_CMD_NEWMCAST_GRP",
    "CTRL_CMD_DELMCAST_GRP",
    "CTRL_CMD_GETMCAST_GRP",
    "CTRL_CMD_GETPOLICY",
];
const CTRL_CMD_NEWFAMILY: u8 = 1;
const CTRL_CMD_GETFAMILY: u8 = 3;

const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_VERSION: u16 = 3;
const CTRL_ATTR_HDRSIZE: u16 = 4;
const CTRL_ATTR_MAXATTR: u16 = 5;
const CTRL_ATTR_OPS: u16 = 6;
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
const CTRL_ATTR_OP_ID: u16 = 1;
const CTRL_ATTR_OP_FLAGS: u16 = 2;
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;

/// `GENL_*` operation flags.
const OP_FLAGS: &[(u32, &str)] = &[
    (0x01, "ADMIN_PERM"),
    (0x02, "CMD_CAP_DO"),
    (0x04, "CMD_CAP_DUMP"),
    (0x08, "CMD_CAP_HASPOL"),
    (0x10, "UNS_ADMIN_PERM"),
];

/// An nlctrl command name (`CTRL_CMD_GETFAMILY`).
fn ctrl_command_name(cmd: u8) -> Name {
    CTRL_COMMANDS.get(usize::from(cmd)).map_or_else(
        || Name::Owned(format!("CTRL_CMD_{cmd}")),
        |name| Name::Borrowed(name),
    )
}

/// A command name within a family, when the family is one this module knows.
fn command_name(family: Option<&str>, cmd: u8) -> Option<Name> {
    match family {
        Some(NLCTRL_NAME) => Some(ctrl_command_name(cmd)),
        Some(ipvs::IPVS_GENL_NAME) => Some(ipvs::command_name(cmd)),
        _ => None,
    }
}

/// The `type` of a genl message: `nlctrl CTRL_CMD_GETFAMILY`, `IPVS_CMD_NEW_SERVICE`,
/// `nl80211 cmd 5`, `genl family 0x25 cmd 5`; without a command, just the family.
pub(crate) fn message_type_name(decoder: &NetlinkDecoder, family_id: u16, cmd: Option<u8>) -> Name {
    let family = decoder.family_name(family_id);
    // Made only when the name needs it: most messages are of a known family's known command.
    let family_label =
        || family.map_or_else(|| format!("genl family {family_id:#x}"), str::to_string);
    match (family, cmd) {
        (_, None) => family_label().into(),
        (Some(NLCTRL_NAME), Some(cmd)) => {
            format!("{NLCTRL_NAME} {}", ctrl_command_name(cmd)).into()
        }
        (family, Some(cmd)) => command_name(family, cmd)
            .unwrap_or_else(|| format!("{} cmd {cmd}", family_label()).into()),
    }
}

/// Decodes a generic netlink message of family `family_id`.
pub(crate) fn decode(
    decoder: &mut NetlinkDecoder,
    family_id: u16,
    payload: &[u8],
    offset: usize,
    errors: &mut Vec<DecodeError>,
) -> MessageBody {
    if payload.len() < GENL_HDRLEN {
        errors.push(DecodeError::Body {
            offset,
            message_type: message_type_name(decoder, family_id, None).into_owned(),
            reason: format!(
                "{} bytes, the genl header needs {GENL_HDRLEN}",
                payload.len()
            ),
        });
        return MessageBody::Raw(super::RawBody {
            hex: Hex::from(payload),
        });
    }
    let (cmd, version) = (payload[0], payload[1]);
    let attributes = &payload[GENL_HDRLEN..];
    let attributes_offset = offset + GENL_HDRLEN;
    match decoder.family_name(family_id) {
        Some(NLCTRL_NAME) => {
            let detail = decoder.detail();
            let body = decode_nlctrl(cmd, version, detail, attributes, attributes_offset, errors);
            if let (Some(id), Some(name)) = (body.family_id, &body.family_name) {
                if cmd == CTRL_CMD_NEWFAMILY || cmd == CTRL_CMD_GETFAMILY {
                    decoder.learn_family(id, name);
                }
            }
            MessageBody::Nlctrl(Box::new(body))
        }
        Some(ipvs::IPVS_GENL_NAME) => MessageBody::Ipvs(Box::new(ipvs::decode(
            cmd,
            version,
            attributes,
            attributes_offset,
            errors,
        ))),
        family => MessageBody::Genl(Box::new(GenlBody {
            family: family.map(str::to_string),
            family_id,
            cmd,
            version,
            hex: Hex::from(attributes),
        })),
    }
}

/// An nlctrl message's attributes; with [`MessageDetail::Shown`] the operation and group lists
/// and the other attributes are walked for their problems and not kept.
fn decode_nlctrl(
    cmd: u8,
    version: u8,
    detail: MessageDetail,
    attributes: &[u8],
    offset: usize,
    errors: &mut Vec<DecodeError>,
) -> NlctrlBody {
    let mut body = NlctrlBody {
        cmd: ctrl_command_name(cmd),
        cmd_id: cmd,
        version,
        family_name: None,
        family_id: None,
        family_version: None,
        hdrsize: None,
        maxattr: None,
        ops: Vec::new(),
        mcast_groups: Vec::new(),
        other_attributes: Vec::new(),
    };
    let keep = detail == MessageDetail::Full;
    // Ops and groups are arrays: a nested attribute per entry, each holding attributes.
    let mut ops: Vec<Attribute> = Vec::new();
    let mut groups: Vec<Attribute> = Vec::new();
    for attribute in walk_attributes(attributes, offset, errors) {
        match attribute.kind {
            CTRL_ATTR_FAMILY_ID => body.family_id = attribute.u16(),
            CTRL_ATTR_FAMILY_NAME => body.family_name = Some(attribute.string()),
            CTRL_ATTR_VERSION => body.family_version = attribute.u32(),
            CTRL_ATTR_HDRSIZE => body.hdrsize = attribute.u32(),
            CTRL_ATTR_MAXATTR => body.maxattr = attribute.u32(),
            CTRL_ATTR_OPS => ops.push(attribute),
            CTRL_ATTR_MCAST_GROUPS => groups.push(attribute),
            _ if keep => body.other_attributes.push(attribute.to_raw()),
            _ => {}
        }
    }
    let family = body.family_name.clone();
    for array in ops {
        for entry in collect_attributes(array.value, array.value_offset(), errors) {
            let fields = walk_attributes(entry.value, entry.value_offset(), errors);
            if !keep {
                fields.for_each(drop);
                continue;
            }
            let mut op = GenlOperation {
                id: 0,
                name: None,
                flags: Vec::new(),
            };
            for field in fields {
                match field.kind {
                    CTRL_ATTR_OP_ID => op.id = field.u32().unwrap_or(0),
                    CTRL_ATTR_OP_FLAGS => op.flags = bit_names(field.u32().unwrap_or(0), OP_FLAGS),
                    _ => {}
                }
            }
            op.name = u8::try_from(op.id)
                .ok()
                .and_then(|id| command_name(family.as_deref(), id));
            body.ops.push(op);
        }
    }
    for array in groups {
        for entry in collect_attributes(array.value, array.value_offset(), errors) {
            let fields = walk_attributes(entry.value, entry.value_offset(), errors);
            if !keep {
                fields.for_each(drop);
                continue;
            }
            let mut group = McastGroup {
                name: String::new(),
                id: 0,
            };
            for field in fields {
                match field.kind {
                    CTRL_ATTR_MCAST_GRP_NAME => group.name = field.string(),
                    CTRL_ATTR_MCAST_GRP_ID => group.id = field.u32().unwrap_or(0),
                    _ => {}
                }
            }
            body.mcast_groups.push(group);
        }
    }
    body
}
