//! What a trace lost: the eBPF side's drop counters (and undecodable records) as one report.

use std::collections::BTreeMap;

use nodeip_trace_common::counter;

use crate::model::event::LostReport;

/// Counters that mean events were lost (not merely filtered).
pub(super) const LOSS_COUNTERS: [(u32, &str); 12] = [
    (counter::GAI_RINGBUF_FULL, "getaddrinfo_ringbuf_full"),
    (counter::GAI_INFLIGHT_FULL, "getaddrinfo_inflight_map_full"),
    (counter::GAI_RESULTS_CUT, "getaddrinfo_results_cut"),
    (counter::NETLINK_RINGBUF_FULL, "netlink_calls_ringbuf_full"),
    (counter::NETLINK_BYTES_CUT, "netlink_bytes_cut"),
    (
        counter::NETLINK_UNKNOWN_SOCKET,
        "netlink_calls_on_unknown_socket",
    ),
    (counter::NETLINK_INFLIGHT_FULL, "netlink_inflight_map_full"),
    (
        counter::NETLINK_CALL_UNSUPPORTED,
        "netlink_calls_unsupported_syscall",
    ),
    (counter::ROUTE_RINGBUF_FULL, "route_lookups_ringbuf_full"),
    (counter::OTHER_RINGBUF_FULL, "other_records_ringbuf_full"),
    (
        counter::HANDLER_INFLIGHT_FULL,
        "kernel_handler_calls_not_followed",
    ),
    (
        counter::HANDLER_RINGBUF_FULL,
        "kernel_handler_records_ringbuf_full",
    ),
];

/// Turns the kernel counters into a lost report (bytes cut are reported, not summed as events).
pub(super) fn lost_report(counters: &[u64], record_errors: u64) -> LostReport {
    let mut counts = BTreeMap::new();
    let mut lost = 0;
    for (index, name) in LOSS_COUNTERS {
        let v = counters.get(index as usize).copied().unwrap_or(0);
        if v > 0 {
            counts.insert(name.to_string(), v);
            if index != counter::NETLINK_BYTES_CUT && index != counter::GAI_RESULTS_CUT {
                lost += v;
            }
        }
    }
    if record_errors > 0 {
        counts.insert("undecodable_records".into(), record_errors);
        lost += record_errors;
    }
    LostReport { counts, lost }
}
