//! Pub/sub commands: `SUBSCRIBE`, `UNSUBSCRIBE`, `PUBLISH` (exact channel names; no
//! patterns). The registry and the inboxes are `clients.rs`'s; the connection's task writes
//! the messages out (server.rs). A master's PUBLISH goes to its replicas too ([`publish`]).

use crate::clients::{Message, Subscriber};
use crate::commands::Session;
use crate::resp::{Reply, Request};
use crate::server::Shared;

/// A subscription's confirmation or a message, as Redis sends it: a push (RESP3) or an
/// array (RESP2) of its kind, the channel and the count or payload.
fn push(kind: &'static str, channel: Option<&[u8]>, last: Reply) -> Reply {
    let channel = channel.map_or(Reply::Null, |c| Reply::Bulk(c.to_vec()));
    Reply::Push(vec![Reply::Bulk(kind.as_bytes().to_vec()), channel, last])
}

/// A published message as its subscriber receives it.
pub fn message(m: &Message) -> Reply {
    push("message", Some(&m.channel), Reply::Bulk(m.payload.to_vec()))
}

/// The channels a session is subscribed to.
pub fn subscriptions(session: &Session) -> usize {
    session.subscriber.as_ref().map_or(0, |s| s.channels.len())
}

/// `SUBSCRIBE channel...`: one confirmation per channel, with the count subscribed after it.
pub fn subscribe(shared: &Shared, session: &mut Session, args: &Request) -> Vec<Reply> {
    let sub = session.subscriber.get_or_insert_with(Subscriber::new);
    let mut replies = Vec::new();
    for channel in &args[1..] {
        if shared.clients.subscribe(session.id, channel, &sub.sender) {
            sub.channels.push(channel.clone());
        }
        replies.push(push("subscribe", Some(channel), Reply::Int(sub.channels.len() as i64)));
    }
    replies
}

/// `UNSUBSCRIBE [channel...]`: from those named, or from every one; one confirmation per
/// channel (one with a nil channel when there was none).
pub fn unsubscribe(shared: &Shared, session: &mut Session, args: &Request) -> Vec<Reply> {
    let Some(sub) = session.subscriber.as_mut() else {
        if args.len() > 1 {
            return args[1..].iter().map(|c| push("unsubscribe", Some(c), Reply::Int(0))).collect();
        }
        return vec![push("unsubscribe", None, Reply::Int(0))];
    };
    let channels: Vec<Vec<u8>> =
        if args.len() > 1 { args[1..].to_vec() } else { sub.channels.clone() };
    if channels.is_empty() {
        return vec![push("unsubscribe", None, Reply::Int(0))];
    }
    let mut replies = Vec::new();
    for channel in channels {
        if shared.clients.unsubscribe(session.id, &channel) {
            sub.channels.retain(|c| *c != channel);
        }
        replies.push(push("unsubscribe", Some(&channel), Reply::Int(sub.channels.len() as i64)));
    }
    if sub.channels.is_empty() {
        // Back to a normal client: its inbox goes (and any message still in it, as Redis
        // delivers none after the confirmation either).
        session.subscriber = None;
    }
    replies
}

/// `PUBLISH channel message`: the number of this server's subscribers that got it, and the
/// replication offset just past it (for the connection's `WAIT`; 0 when nothing was fed).
///
/// As in Redis, a master feeds the command to its replication stream, so that each replica
/// delivers the message to its own subscribers (a replica's link runs it as a client's
/// PUBLISH, and passes it on to its replicas with the rest of its master's stream). The
/// connection's run was flushed before it (mod.rs), so its writes before the PUBLISH are
/// fed before it: a replica's subscriber that reads a key on hearing the message finds what
/// the publisher wrote before publishing. A PUBLISH on a replica stays there: its stream is
/// its master's ([`crate::replication::Replication::feed`] feeds nothing on a replica).
pub fn publish(shared: &Shared, args: &Request) -> (Reply, u64) {
    let got = shared.clients.publish(&args[1], &args[2]);
    let woff = shared
        .keyspace
        .replication()
        .feed(|out| crate::replication::encode_command(out, &[b"PUBLISH", &args[1], &args[2]]));
    (Reply::Int(got as i64), woff)
}
