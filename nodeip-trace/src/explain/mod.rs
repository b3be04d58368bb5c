//! explain: why the events are what they are — RFC 6724 ordering as glibc applies it, diagnoses
//! of the known failure patterns.
pub mod diagnose;
pub mod gai_conf;
pub mod node_audit;
pub mod resolver;
pub mod rfc6724;
