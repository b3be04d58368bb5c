//! Kernel handler records → [`KernelHandlerCall`]: which function, which hook, the namespace the
//! kernel answered in, the request it was given (decoded like any netlink buffer) and its result.
use nodeip_trace_common::{
    handler_flags, handler_function, hook_mode, KernelHandlerRecord, HANDLER_FUNCTIONS,
};

use crate::decode::netlink::{errno_name, DecodedBuffer};
use crate::model::event::KernelHandlerCall;

/// Netlink protocol of the requests `function` handles (generic netlink for IPVS).
pub fn handler_protocol(function: u32) -> u16 {
    if function == handler_function::IP_VS_GENL_SET_CMD {
        16
    } else {
        0
    }
}

/// How a kernel function was probed, by its `hook_mode` number: `fentry`, `kprobe`.
pub fn hook_name(mode: u32) -> &'static str {
    match mode {
        hook_mode::FENTRY => "fentry",
        hook_mode::KPROBE => "kprobe",
        _ => "unknown",
    }
}

/// Decodes one record; `decode` turns request bytes of a netlink protocol into messages (the
/// pipeline's decoder, which knows interface names and generic-netlink family ids).
pub fn decode_kernel_handler(
    rec: &KernelHandlerRecord,
    decode: impl FnOnce(u16, &[u8]) -> DecodedBuffer,
) -> KernelHandlerCall {
    let function = rec
        .function
        .checked_sub(1)
        .and_then(|i| HANDLER_FUNCTIONS.get(i as usize))
        .map_or_else(|| format!("handler#{}", rec.function), |f| f.to_string());
    let hook = hook_name(rec.mode);
    let mut decode_errors = Vec::new();
    let cut = rec.flags & handler_flags::REQUEST_CUT != 0;
    let request = if rec.flags & handler_flags::REQUEST_UNREADABLE != 0 {
        decode_errors.push(format!(
            "the request of {function} could not be read (its offset is not in this kernel's BTF, or the pointer was bad)"
        ));
        None
    } else {
        let len = (rec.request_len as usize).min(rec.request.len());
        let mut bytes = rec.request[..len].to_vec();
        if cut && bytes.len() >= 4 {
            // Decode what was copied: the header's length is made to say so.
            bytes[..4].copy_from_slice(&(len as u32).to_ne_bytes());
        }
        let decoded = decode(handler_protocol(rec.function), &bytes);
        decode_errors.extend(decoded.errors.iter().map(|e| e.to_string()));
        decoded.messages.into_iter().next()
    };
    KernelHandlerCall {
        function,
        hook: hook.into(),
        handler_netns: (rec.flags & handler_flags::NETNS_UNKNOWN == 0).then_some(rec.handler_netns),
        result: rec.ret,
        errno: (rec.ret < 0).then(|| errno_name(rec.ret as i32).to_string()),
        request: request.map(Box::new),
        request_len: rec.request_nlmsg_len,
        request_cut: cut,
        duration_ns: rec.header.ts_ns.saturating_sub(rec.start_ns),
        decode_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::netlink::NetlinkDecoder;
    use crate::model::netlink::MessageBody;
    use nodeip_trace_common::{EventHeader, HANDLER_REQUEST_LEN, KIND_KERNEL_HANDLER};

    /// `ip route get 10.1.2.3` as iproute2 sends it: RTM_GETROUTE with RTA_DST.
    fn route_get() -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&36u32.to_ne_bytes()); // nlmsg_len
        m.extend_from_slice(&26u16.to_ne_bytes()); // RTM_GETROUTE
        m.extend_from_slice(&1u16.to_ne_bytes()); // NLM_F_REQUEST
        m.extend_from_slice(&7u32.to_ne_bytes()); // seq
        m.extend_from_slice(&0u32.to_ne_bytes()); // pid
        m.extend_from_slice(&[2, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // rtmsg: AF_INET, /32
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&1u16.to_ne_bytes()); // RTA_DST
        m.extend_from_slice(&[10, 1, 2, 3]);
        m
    }

    fn record(function: u32, ret: i64, request: &[u8], flags: u32) -> KernelHandlerRecord {
        let mut rec = KernelHandlerRecord {
            header: EventHeader {
                kind: KIND_KERNEL_HANDLER,
                netns: 1,
                ts_ns: 5_000,
                pid_tgid: (9 << 32) | 9,
                cgroup_id: 0,
                comm: [0; 16],
            },
            start_ns: 2_000,
            function,
            mode: hook_mode::FENTRY,
            ret,
            handler_netns: 4026531840,
            request_nlmsg_len: request.len() as u32,
            request_len: request.len().min(HANDLER_REQUEST_LEN) as u32,
            flags,
            request: [0; HANDLER_REQUEST_LEN],
        };
        let n = request.len().min(HANDLER_REQUEST_LEN);
        rec.request[..n].copy_from_slice(&request[..n]);
        rec
    }

    #[test]
    fn decodes_a_route_get_with_its_error() {
        let rec = record(handler_function::INET_RTM_GETROUTE, -101, &route_get(), 0);
        let mut decoder = NetlinkDecoder::new();
        let call = decode_kernel_handler(&rec, |p, b| decoder.decode(p, b));
        assert_eq!(call.function, "inet_rtm_getroute");
        assert_eq!(call.hook, "fentry");
        assert_eq!(call.handler_netns, Some(4026531840));
        assert_eq!(call.errno.as_deref(), Some("ENETUNREACH"));
        assert_eq!(call.duration_ns, 3_000);
        let request = call.request.expect("request decoded");
        assert_eq!(request.header.type_name, "RTM_GETROUTE");
        assert!(
            matches!(request.body, MessageBody::Route(_)),
            "{:?}",
            request.body
        );
        assert!(call.decode_errors.is_empty(), "{:?}", call.decode_errors);
    }

    #[test]
    fn unreadable_and_cut_requests_are_said() {
        let rec = record(
            handler_function::IP_VS_GENL_SET_CMD,
            0,
            &[],
            handler_flags::REQUEST_UNREADABLE | handler_flags::NETNS_UNKNOWN,
        );
        let call = decode_kernel_handler(&rec, |_, _| DecodedBuffer::default());
        assert_eq!(call.function, "ip_vs_genl_set_cmd");
        assert!(call.request.is_none());
        assert_eq!(call.handler_netns, None);
        assert!(call.decode_errors[0].contains("could not be read"));

        let mut long = route_get();
        long.resize(HANDLER_REQUEST_LEN + 100, 0);
        long[..4].copy_from_slice(&((HANDLER_REQUEST_LEN + 100) as u32).to_ne_bytes());
        let rec = record(
            handler_function::INET_RTM_GETROUTE,
            0,
            &long,
            handler_flags::REQUEST_CUT,
        );
        let mut decoder = NetlinkDecoder::new();
        let call = decode_kernel_handler(&rec, |p, b| decoder.decode(p, b));
        assert!(call.request_cut);
        assert_eq!(call.request_len, (HANDLER_REQUEST_LEN + 100) as u32);
        assert!(call.request.is_some());
    }

    #[test]
    fn unknown_function_numbers_are_named_by_number() {
        let rec = record(99, 0, &route_get(), 0);
        let call = decode_kernel_handler(&rec, |_, _| DecodedBuffer::default());
        assert_eq!(call.function, "handler#99");
    }
}
