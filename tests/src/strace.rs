//! Reads `strace -f -qq -v -s 65535 -e trace=network -o LOG` output: the netlink messages each
//! process sent and received, as strace decoded them, in syscall order. The strace cross-check
//! compares them with our `netlink` events.
//!
//! strace prints values in a small C-like syntax: `{key=value, …}` structs, `[…]` arrays,
//! `"…"` strings with C escapes, calls such as `inet_addr("192.0.2.1")` or
//! `if_nametoindex("lo")`, and bare atoms (numbers, names, `NLM_F_REQUEST|0x300`, MACs), with
//! `/* … */` comments. [`parse_value`] reads that into a [`Value`] tree.
use std::collections::HashMap;

/// One value of strace's output syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// `{key=value, …}` (a field without `key=` has key `None`).
    Struct(Vec<(Option<String>, Value)>),
    /// `[a, b, …]`.
    List(Vec<Value>),
    /// `"…"`, unescaped to bytes.
    Str(Vec<u8>),
    /// `name(arg, …)`.
    Call(String, Vec<Value>),
    /// Anything else, comments removed and trimmed: `36`, `-ENOENT`, `NLM_F_REQUEST|0x300`.
    Atom(String),
}

impl Value {
    /// The field `key` of a struct.
    pub fn field(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields
                .iter()
                .find(|(k, _)| k.as_deref() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The atom's text (empty for other values).
    pub fn atom(&self) -> &str {
        match self {
            Value::Atom(a) => a,
            _ => "",
        }
    }
}

/// A parse error: where, and what was expected.
#[derive(Debug)]
pub struct ParseError(pub String);

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }

    fn error(&self, what: &str) -> ParseError {
        let rest = String::from_utf8_lossy(&self.s[self.at.min(self.s.len())..]);
        ParseError(format!(
            "{what} at byte {}: {}",
            self.at,
            rest.chars().take(60).collect::<String>()
        ))
    }

    fn expect(&mut self, byte: u8) -> Result<(), ParseError> {
        self.skip_space();
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", byte as char)))
        }
    }

    /// Values separated by commas up to `close`.
    fn sequence(
        &mut self,
        close: u8,
        keyed: bool,
    ) -> Result<Vec<(Option<String>, Value)>, ParseError> {
        let mut items = Vec::new();
        loop {
            self.skip_space();
            if self.peek() == Some(close) {
                self.at += 1;
                return Ok(items);
            }
            let key = if keyed { self.key() } else { None };
            let mut value = self.value()?;
            self.skip_space();
            // `[DESIGNATOR]=value` array items (IFLA_INET_CONF): keep the value.
            if self.peek() == Some(b'=') {
                self.at += 1;
                value = self.value()?;
                self.skip_space();
            }
            items.push((key, value));
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(c) if c == close => {}
                _ => return Err(self.error(&format!("expected ',' or {:?}", close as char))),
            }
        }
    }

    /// `ident=` at the cursor (consumed), if there is one.
    fn key(&mut self) -> Option<String> {
        let start = self.at;
        let mut end = start;
        while end < self.s.len() && (self.s[end].is_ascii_alphanumeric() || self.s[end] == b'_') {
            end += 1;
        }
        if end > start && self.s.get(end) == Some(&b'=') && !self.s[start].is_ascii_digit() {
            self.at = end + 1;
            return Some(String::from_utf8_lossy(&self.s[start..end]).into_owned());
        }
        None
    }

    fn string(&mut self) -> Result<Vec<u8>, ParseError> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            self.at += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.peek().ok_or_else(|| self.error("dangling escape"))?;
                    self.at += 1;
                    out.push(match e {
                        b'x' => {
                            let hex =
                                std::str::from_utf8(&self.s[self.at..self.at + 2]).unwrap_or("");
                            self.at += 2;
                            u8::from_str_radix(hex, 16).map_err(|_| self.error("bad \\x escape"))?
                        }
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.peek() {
                                    Some(d @ b'0'..=b'7') => {
                                        v = v * 8 + u32::from(d - b'0');
                                        self.at += 1;
                                    }
                                    _ => break,
                                }
                            }
                            v as u8
                        }
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        b'v' => 0x0b,
                        b'f' => 0x0c,
                        other => other,
                    });
                }
                other => out.push(other),
            }
        }
        // A string cut by -s is followed by `...`.
        if self.s[self.at..].starts_with(b"...") {
            self.at += 3;
        }
        Ok(out)
    }

    fn value(&mut self) -> Result<Value, ParseError> {
        self.skip_space();
        match self.peek() {
            Some(b'{') => {
                self.at += 1;
                Ok(Value::Struct(self.sequence(b'}', true)?))
            }
            Some(b'[') => {
                self.at += 1;
                let items = self.sequence(b']', false)?;
                Ok(Value::List(items.into_iter().map(|(_, v)| v).collect()))
            }
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(_) => self.atom_or_call(),
            None => Err(self.error("expected a value")),
        }
    }

    fn atom_or_call(&mut self) -> Result<Value, ParseError> {
        let mut text = Vec::new();
        while let Some(c) = self.peek() {
            if self.s[self.at..].starts_with(b"/*") {
                let end = self.s[self.at..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .ok_or_else(|| self.error("unterminated comment"))?;
                self.at += end + 2;
                continue;
            }
            match c {
                b',' | b'}' | b']' | b')' => break,
                b'(' => {
                    self.at += 1;
                    let name = String::from_utf8_lossy(&text).trim().to_string();
                    let args = self.sequence(b')', false)?;
                    return Ok(Value::Call(
                        name,
                        args.into_iter().map(|(_, v)| v).collect(),
                    ));
                }
                _ => {
                    text.push(c);
                    self.at += 1;
                }
            }
        }
        Ok(Value::Atom(
            String::from_utf8_lossy(&text).trim().to_string(),
        ))
    }
}

/// Parses one value (the whole of `text` must be it, bar trailing spaces).
pub fn parse_value(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
    };
    let v = p.value()?;
    p.skip_space();
    if p.at != p.s.len() {
        return Err(p.error("trailing text"));
    }
    Ok(v)
}

/// One traced syscall: `PID name(args…) = ret`.
#[derive(Clone, Debug)]
pub struct Syscall {
    /// The process (strace -f prefixes each line with it).
    pub pid: u32,
    /// Syscall name.
    pub name: String,
    /// Its arguments, decoded.
    pub args: Vec<Value>,
    /// The return value as printed (`36`, `-1 ENOENT (…)`).
    pub ret: String,
}

/// Parses one line of `strace -f` output; `None` for lines that are not a whole syscall
/// (`+++ exited …`, signals).
pub fn parse_line(line: &str) -> Result<Option<Syscall>, ParseError> {
    assert!(
        !line.contains("<unfinished ...>") && !line.contains("resumed>"),
        "interleaved syscalls are not handled: {line}"
    );
    let line = line.trim_end();
    let (pid, rest) = line.split_once(' ').unwrap_or(("", line));
    let Ok(pid) = pid.parse() else {
        return Ok(None);
    };
    let rest = rest.trim_start();
    let Some(open) = rest.find('(') else {
        return Ok(None);
    };
    let Some(eq) = rest.rfind(") = ") else {
        return Ok(None);
    };
    let mut p = Parser {
        s: &rest.as_bytes()[..eq + 1],
        at: open + 1,
    };
    let args = p.sequence(b')', false)?;
    Ok(Some(Syscall {
        pid,
        name: rest[..open].to_string(),
        args: args.into_iter().map(|(_, v)| v).collect(),
        ret: rest[eq + 4..].to_string(),
    }))
}

/// One netlink message as strace showed it.
#[derive(Clone, Debug)]
pub struct Message {
    /// `send` or `recv` (our events' direction names).
    pub direction: &'static str,
    /// `{nlmsg_len=…, nlmsg_type=…, nlmsg_flags=…, nlmsg_seq=…, nlmsg_pid=…}`.
    pub header: Value,
    /// The decoded fixed header (`{rtm_family=…}`, `{error=…, msg=…}`), a raw string, or an
    /// atom (`0` after NLMSG_DONE); `None` for a bare header.
    pub body: Option<Value>,
    /// The attributes after the fixed header (`[{nla_len=…, nla_type=…}, value]` or a list of
    /// those).
    pub attributes: Option<Value>,
}

/// strace prints one item (a message, an attribute) as `[part, part…]` and several as a list of
/// those: the parts of each item.
pub fn one_or_many(v: &Value) -> Vec<&[Value]> {
    match v {
        Value::List(items) if matches!(items.first(), Some(Value::List(_))) => items
            .iter()
            .filter_map(|item| match item {
                Value::List(parts) => Some(parts.as_slice()),
                _ => None,
            })
            .collect(),
        Value::List(items) => vec![items.as_slice()],
        _ => Vec::new(),
    }
}

/// The attributes of a message (`[{nla_len=…, nla_type=T}, value]`, or a list of those):
/// `(T, value)`.
pub fn attributes(v: &Value) -> Vec<(String, Value)> {
    one_or_many(v)
        .into_iter()
        .filter_map(|parts| {
            let kind = parts.first()?.field("nla_type")?.atom().to_string();
            Some((kind, parts.get(1)?.clone()))
        })
        .collect()
}

/// The messages in one netlink buffer as strace printed it: `[hdr, body, attrs]` for one
/// message, a list of those for several; header-only padding (`nlmsg_len=0`) is dropped.
pub fn buffer_messages(buffer: &Value, direction: &'static str) -> Vec<Message> {
    let one = |items: &[Value]| -> Option<Message> {
        let header = items.first()?.clone();
        header.field("nlmsg_len")?;
        Some(Message {
            direction,
            header,
            body: items.get(1).cloned(),
            attributes: items.get(2).cloned(),
        })
    };
    let messages: Vec<Message> = match buffer {
        Value::Struct(_) => one(std::slice::from_ref(buffer)).into_iter().collect(),
        other => one_or_many(other).into_iter().filter_map(one).collect(),
    };
    messages
        .into_iter()
        .filter(|m| m.header.field("nlmsg_len").map(Value::atom) != Some("0"))
        .collect()
}

/// Every netlink message of a strace log, per process, in syscall order. Only sockets created
/// by `socket(AF_NETLINK, …)` in the log count; failed calls carry no messages.
pub fn netlink_messages(log: &str) -> Result<HashMap<u32, Vec<Message>>, ParseError> {
    let mut netlink_fds: HashMap<(u32, String), String> = HashMap::new();
    let mut out: HashMap<u32, Vec<Message>> = HashMap::new();
    for line in log.lines() {
        let Some(call) = parse_line(line)? else {
            continue;
        };
        let fd = call
            .args
            .first()
            .map(|a| a.atom().to_string())
            .unwrap_or_default();
        if call.name == "socket" {
            let key = (call.pid, call.ret.clone());
            match call.args.as_slice() {
                [family, _, protocol] if family.atom() == "AF_NETLINK" => {
                    netlink_fds.insert(key, protocol.atom().to_string());
                }
                _ => {
                    netlink_fds.remove(&key);
                }
            }
            continue;
        }
        if !netlink_fds.contains_key(&(call.pid, fd)) || call.ret.starts_with('-') {
            continue;
        }
        let direction = match call.name.as_str() {
            "sendto" | "sendmsg" => "send",
            "recvfrom" | "recvmsg" => "recv",
            _ => continue,
        };
        let buffers: Vec<&Value> = match call.name.as_str() {
            "sendto" | "recvfrom" => call.args.get(1).into_iter().collect(),
            _ => match call.args.get(1).and_then(|m| m.field("msg_iov")) {
                Some(Value::List(iovs)) => {
                    iovs.iter().filter_map(|i| i.field("iov_base")).collect()
                }
                _ => Vec::new(),
            },
        };
        let entry = out.entry(call.pid).or_default();
        for buffer in buffers {
            entry.extend(buffer_messages(buffer, direction));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_sendmsg_with_a_route_request() {
        let line = r#"8983  sendmsg(3, {msg_name={sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, msg_namelen=12, msg_iov=[{iov_base=[{nlmsg_len=36, nlmsg_type=RTM_GETROUTE, nlmsg_flags=NLM_F_REQUEST, nlmsg_seq=1795271176, nlmsg_pid=0}, {rtm_family=AF_INET, rtm_dst_len=32, rtm_flags=RTM_F_LOOKUP_TABLE}, [{nla_len=8, nla_type=RTA_DST}, inet_addr("192.0.2.77")]], iov_len=36}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0) = 36"#;
        let log =
            format!("8983  socket(AF_NETLINK, SOCK_RAW|SOCK_CLOEXEC, NETLINK_ROUTE) = 3\n{line}\n");
        let messages = &netlink_messages(&log).unwrap()[&8983];
        assert_eq!(messages.len(), 1);
        let m = &messages[0];
        assert_eq!(m.direction, "send");
        assert_eq!(m.header.field("nlmsg_type").unwrap().atom(), "RTM_GETROUTE");
        assert_eq!(
            m.body
                .as_ref()
                .unwrap()
                .field("rtm_dst_len")
                .unwrap()
                .atom(),
            "32"
        );
        let address = Value::Call("inet_addr".into(), vec![Value::Str(b"192.0.2.77".to_vec())]);
        let attribute = parse_value("{nla_len=8, nla_type=RTA_DST}").unwrap();
        assert_eq!(m.attributes, Some(Value::List(vec![attribute, address])));
    }

    #[test]
    fn parses_comments_escapes_padding_and_errors() {
        let buffer = parse_value(
            r#"[[{nlmsg_len=24, nlmsg_type=0x3f /* GENERIC_FAMILY_??? */, nlmsg_flags=NLM_F_REQUEST|0x300, nlmsg_seq=1, nlmsg_pid=-5}, "\x04\x01\101\n"], {nlmsg_len=0, nlmsg_type=0 /* NLMSG_??? */, nlmsg_flags=0, nlmsg_seq=0, nlmsg_pid=0}]"#,
        )
        .unwrap();
        let messages = buffer_messages(&buffer, "send");
        assert_eq!(messages.len(), 1, "padding header dropped");
        assert_eq!(
            messages[0].header.field("nlmsg_type").unwrap().atom(),
            "0x3f"
        );
        assert_eq!(messages[0].body, Some(Value::Str(vec![4, 1, b'A', b'\n'])));
        let error =
            parse_value(r#"{error=-ENOENT, msg=[{nlmsg_len=32, nlmsg_type=nlctrl}, "\x03"]}"#)
                .unwrap();
        assert_eq!(error.field("error").unwrap().atom(), "-ENOENT");
        assert!(matches!(error.field("msg"), Some(Value::List(_))));
    }
}
