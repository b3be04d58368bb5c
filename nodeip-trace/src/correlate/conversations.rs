//! Pairs netlink requests with their replies into conversations.
//!
//! A request (a sent message with `NLM_F_REQUEST`) opens a conversation keyed by the process, the
//! netlink protocol and the sequence number; received messages with that key are its replies
//! (checked against the socket's port id once known). It ends with `NLMSG_DONE` (dumps), an
//! `NLMSG_ERROR` (errors and ACKs), or the single reply of a plain request. What the kernel
//! answered is summarised as facts a person looks for (addresses with primary/secondary, routes
//! with table/type/dev/src, links, generic netlink family ids), capped so a million-route dump
//! stays one small event. Requests never answered are returned by [`ConversationTracker::drain`].
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::model::event::{ConversationError, ConversationOutcome, NetlinkConversation};
use crate::model::facts::ConversationFacts;
use crate::model::frame::{Direction, Task};
use crate::model::id_hash::IdMap;
use crate::model::netlink::{MessageBody, Name, NetlinkMessage, NETLINK_GENERIC, NETLINK_ROUTE};

/// Conversations kept open at once; beyond this the oldest is closed as unanswered, so a process
/// that never reads its replies cannot grow the tracker without bound.
pub const MAX_OPEN: usize = 4096;

/// Who a conversation belongs to: process (0 in captures without attribution), protocol, seq.
type ConversationKey = (u32, u16, u32);

/// A conversation waiting for (more) replies.
#[derive(Debug)]
struct OpenConversation {
    task: Task,
    ts_ns: u64,
    order: u64,
    conversation: NetlinkConversation,
    last_reply_ns: u64,
    /// The received buffer (the tracker's count of them) whose bytes were last added: a buffer
    /// with several of its replies counts once.
    counted_in: u64,
}

impl OpenConversation {
    /// Whether `reply` can answer this request: port ids agree when both known, and the reply
    /// is of the request's kind (so same-seq requests on two sockets are not crossed).
    fn accepts(&self, reply: &NetlinkMessage) -> bool {
        let reply_pid = reply.header.pid;
        let port_ok = reply_pid == 0 || self.conversation.portid.is_none_or(|p| p == reply_pid);
        port_ok
            && answers(
                &self.conversation.request,
                self.conversation.protocol_id,
                reply,
            )
    }

    /// The conversation as it stands; `answered` is false when it ends without its last reply.
    fn complete(self, answered: bool) -> CompletedConversation {
        let mut conversation = self.conversation;
        conversation.duration_ns = self.last_reply_ns.saturating_sub(self.ts_ns);
        if !answered {
            conversation.outcome = if conversation.replies == 0 {
                ConversationOutcome::NoReply
            } else {
                ConversationOutcome::Incomplete
            };
        }
        CompletedConversation {
            task: self.task,
            ts_ns: self.ts_ns,
            conversation,
        }
    }
}

/// A finished (or abandoned) conversation, ready to become an event.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletedConversation {
    /// The process that sent the request.
    pub task: Task,
    /// When the request was sent.
    pub ts_ns: u64,
    /// The conversation.
    pub conversation: NetlinkConversation,
}

/// What one buffer did to the conversations.
#[derive(Debug, Default, PartialEq)]
pub struct BufferPairing {
    /// Every message of the buffer belongs to a conversation (so a timeline may show the
    /// conversation instead of the buffer).
    pub paired: bool,
    /// The socket's port id, when known.
    pub portid: Option<u32>,
    /// Conversations this buffer completed, in message order.
    pub completed: Vec<CompletedConversation>,
}

/// One netlink buffer as the tracker needs it.
#[derive(Clone, Copy, Debug)]
pub struct BufferRef<'a> {
    /// The process (default when unknown).
    pub task: &'a Task,
    /// Send or receive.
    pub direction: Direction,
    /// Netlink protocol number.
    pub protocol: u16,
    /// Timestamp of the buffer.
    pub ts_ns: u64,
    /// Bytes the syscall moved.
    pub bytes: u32,
    /// The decoded messages (shared with the buffer's event: a request's conversation keeps
    /// the same message).
    pub messages: &'a [Arc<NetlinkMessage>],
}

/// Pairs requests and replies; see the module documentation.
#[derive(Debug, Default)]
pub struct ConversationTracker {
    open: IdMap<ConversationKey, OpenQueue>,
    open_count: usize,
    next_order: u64,
    /// Received buffers seen (numbers them for [`OpenConversation::counted_in`]).
    received: u64,
}

/// The open conversations of one key, oldest first. Nearly always one (a key is a process's
/// sequence number): it is kept in place, so opening a conversation allocates no queue (a
/// queue of four was a 1.3 KiB allocation, past the allocator's small sizes, per request).
#[derive(Debug, Default)]
struct OpenQueue {
    first: Option<OpenConversation>,
    rest: VecDeque<OpenConversation>,
}

impl OpenQueue {
    fn push_back(&mut self, c: OpenConversation) {
        if self.first.is_none() {
            self.first = Some(c);
        } else {
            self.rest.push_back(c);
        }
    }

    fn front(&self) -> Option<&OpenConversation> {
        self.first.as_ref()
    }

    fn iter(&self) -> impl Iterator<Item = &OpenConversation> {
        self.first.iter().chain(&self.rest)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut OpenConversation> {
        self.first.iter_mut().chain(&mut self.rest)
    }

    /// Removes the `index`th oldest.
    fn remove(&mut self, index: usize) -> Option<OpenConversation> {
        if index == 0 {
            let first = self.first.take();
            self.first = self.rest.pop_front();
            first
        } else {
            self.rest.remove(index - 1)
        }
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }
}

impl IntoIterator for OpenQueue {
    type Item = OpenConversation;
    type IntoIter = std::iter::Chain<
        std::option::IntoIter<OpenConversation>,
        std::collections::vec_deque::IntoIter<OpenConversation>,
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

/// `NETLINK_ROUTE`: message types come in groups of four (NEW, DEL, GET, SET) from 16.
const RTM_BASE: u16 = 16;

/// Whether `reply` is of a type that answers `request` on `protocol`.
fn answers(request: &NetlinkMessage, protocol: u16, reply: &NetlinkMessage) -> bool {
    let (asked, got) = (request.header.type_id, reply.header.type_id);
    match &reply.body {
        MessageBody::Error(e) => e.request.as_ref().is_none_or(|r| r.type_id == asked),
        MessageBody::Done(_) => true,
        _ if protocol == NETLINK_ROUTE && asked >= RTM_BASE && got >= RTM_BASE => {
            (asked - RTM_BASE) / 4 == (got - RTM_BASE) / 4
        }
        _ if protocol == NETLINK_GENERIC => asked == got,
        _ => true,
    }
}

fn has_flag(m: &NetlinkMessage, flag: &str) -> bool {
    m.header.flags.iter().any(|f| f == flag)
}

impl ConversationTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one decoded buffer (in capture order).
    pub fn on_buffer(&mut self, buffer: BufferRef<'_>) -> BufferPairing {
        match buffer.direction {
            Direction::Send => self.on_send(buffer),
            Direction::Recv => self.on_recv(buffer),
        }
    }

    fn on_send(&mut self, buffer: BufferRef<'_>) -> BufferPairing {
        let mut pairing = BufferPairing {
            paired: !buffer.messages.is_empty(),
            portid: None,
            completed: Vec::new(),
        };
        for m in buffer.messages {
            if !has_flag(m, "REQUEST") {
                pairing.paired = false;
                continue;
            }
            // Requests name their socket's port id only when the client fills it in (libnl,
            // libmnl do; iproute2 and glibc send 0). File descriptors are reused too fast to
            // carry a port id from one socket's conversation to the next request.
            let portid = Some(m.header.pid).filter(|p| *p != 0);
            pairing.portid = pairing.portid.or(portid);
            if self.open_count >= MAX_OPEN {
                pairing.completed.extend(self.close_oldest());
            }
            let key = (buffer.task.pid, buffer.protocol, m.header.seq);
            let order = self.next_order;
            self.next_order += 1;
            self.open
                .entry(key)
                .or_default()
                .push_back(OpenConversation {
                    task: buffer.task.clone(),
                    ts_ns: buffer.ts_ns,
                    order,
                    conversation: NetlinkConversation {
                        protocol: crate::decode::netlink::protocol_name(buffer.protocol),
                        protocol_id: buffer.protocol,
                        portid,
                        seq: m.header.seq,
                        dump: has_flag(m, "DUMP"),
                        request: Arc::clone(m),
                        replies: 0,
                        reply_types: BTreeMap::new(),
                        reply_buffers: 0,
                        reply_bytes: 0,
                        outcome: ConversationOutcome::NoReply,
                        error: None,
                        duration_ns: 0,
                        facts: ConversationFacts::default(),
                    },
                    last_reply_ns: buffer.ts_ns,
                    counted_in: 0,
                });
            self.open_count += 1;
        }
        pairing
    }

    /// The open conversation a reply belongs to: same key, and the same port id when both known.
    fn find_open(
        &mut self,
        key: ConversationKey,
        reply: &NetlinkMessage,
    ) -> Option<&mut OpenConversation> {
        self.open
            .get_mut(&key)?
            .iter_mut()
            .find(|c| c.accepts(reply))
    }

    fn on_recv(&mut self, buffer: BufferRef<'_>) -> BufferPairing {
        let mut pairing = BufferPairing {
            paired: !buffer.messages.is_empty(),
            portid: None,
            completed: Vec::new(),
        };
        self.received += 1;
        let this_buffer = self.received;
        for m in buffer.messages {
            let key = (buffer.task.pid, buffer.protocol, m.header.seq);
            let reply_pid = m.header.pid;
            let Some(open) = self.find_open(key, m) else {
                pairing.paired = false;
                continue;
            };
            if reply_pid != 0 {
                open.conversation.portid = Some(reply_pid);
                pairing.portid = Some(reply_pid);
            }
            if open.counted_in != this_buffer {
                open.counted_in = this_buffer;
                open.conversation.reply_buffers += 1;
                open.conversation.reply_bytes += u64::from(buffer.bytes);
            }
            open.last_reply_ns = buffer.ts_ns;
            let c = &mut open.conversation;
            let finished = match &m.body {
                MessageBody::Error(e) => {
                    if e.error == 0 {
                        c.outcome = ConversationOutcome::Ack;
                    } else {
                        c.outcome = ConversationOutcome::Error;
                        c.error = Some(ConversationError {
                            code: e.error,
                            errno: e.errno.clone(),
                            text: e.text.clone(),
                            extack: e.extack_msg.clone(),
                        });
                    }
                    true
                }
                MessageBody::Done(d) => {
                    match d.status.filter(|s| *s != 0) {
                        Some(code) => {
                            c.outcome = ConversationOutcome::Error;
                            c.error = Some(ConversationError {
                                code,
                                errno: d.errno.clone().unwrap_or_default(),
                                text: Name::Borrowed(""),
                                extack: d.extack_msg.clone(),
                            });
                        }
                        None => c.outcome = ConversationOutcome::Done,
                    }
                    true
                }
                _ => {
                    c.replies += 1;
                    *c.reply_types.entry(m.header.type_name.clone()).or_default() += 1;
                    c.facts.add(m);
                    c.outcome = ConversationOutcome::Reply;
                    // Dumps end with DONE, acknowledged requests with an ACK; anything else
                    // ends with its one reply.
                    !(c.dump || has_flag(m, "MULTI") || has_flag(&c.request, "ACK"))
                }
            };
            if finished {
                pairing.completed.extend(self.close(key, m));
            }
        }
        pairing
    }

    /// Removes the conversation a reply matched and returns it completed.
    fn close(
        &mut self,
        key: ConversationKey,
        reply: &NetlinkMessage,
    ) -> Option<CompletedConversation> {
        let queue = self.open.get_mut(&key)?;
        let index = queue.iter().position(|c| c.accepts(reply))?;
        let open = queue.remove(index)?;
        if queue.is_empty() {
            self.open.remove(&key);
        }
        self.open_count -= 1;
        Some(open.complete(true))
    }

    fn close_oldest(&mut self) -> Option<CompletedConversation> {
        let key = *self
            .open
            .iter()
            .filter_map(|(k, q)| q.front().map(|c| (k, c.order)))
            .min_by_key(|(_, order)| *order)?
            .0;
        let queue = self.open.get_mut(&key)?;
        let open = queue.remove(0)?;
        if queue.is_empty() {
            self.open.remove(&key);
        }
        self.open_count -= 1;
        Some(open.complete(false))
    }

    /// Every conversation still open (end of trace), oldest first: unanswered, or cut short.
    pub fn drain(&mut self) -> Vec<CompletedConversation> {
        let mut all: Vec<OpenConversation> = self.open.drain().flat_map(|(_, q)| q).collect();
        self.open_count = 0;
        all.sort_by_key(|c| c.order);
        all.into_iter().map(|c| c.complete(false)).collect()
    }
}

#[cfg(test)]
mod tests;
