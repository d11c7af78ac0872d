//! The connected clients, for `CLIENT KILL` and pub/sub: each connection registers here
//! while it lives, with a signal that ends it and its pub/sub inbox.
//!
//! Pub/sub (`SUBSCRIBE`, `UNSUBSCRIBE`, `PUBLISH`, exact channel names only): a subscribed
//! connection has an inbox, a bounded queue of [`Message`]s its task writes out while it
//! waits for the client. `PUBLISH` puts the message in the inbox of every subscriber of the
//! channel without waiting; a subscriber whose inbox is full (it stopped reading
//! [`INBOX_MESSAGES_MAX`] messages ago) is disconnected, as Redis's `client-output-buffer-limit
//! pubsub` disconnects one, rather than slowing the publisher or holding its messages
//! without bound. Redis Sentinel needs this: it subscribes to `__sentinel__:hello` on every
//! instance it monitors, and drops a link that hears nothing on it for six seconds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, mpsc};

/// Messages a subscriber's inbox holds before the subscriber is disconnected.
pub const INBOX_MESSAGES_MAX: usize = 8192;

/// One published message.
#[derive(Debug, Clone)]
pub struct Message {
    /// The channel it was published on.
    pub channel: Arc<[u8]>,
    /// What was published.
    pub payload: Arc<[u8]>,
}

/// What the registry keeps of one connection.
struct Entry {
    kill: Arc<Notify>,
    /// Channels subscribed: 0 for a normal client (`CLIENT KILL TYPE normal`), more for a
    /// pub/sub one (`TYPE pubsub`).
    subscriptions: usize,
}

#[derive(Default)]
struct Inner {
    clients: HashMap<u64, Entry>,
    channels: HashMap<Vec<u8>, HashMap<u64, mpsc::Sender<Message>>>,
}

/// The registry of connected clients and of pub/sub channels.
#[derive(Default)]
pub struct Clients {
    inner: Mutex<Inner>,
}

/// Which clients `CLIENT KILL TYPE` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Not subscribed to any channel.
    Normal,
    /// Subscribed to at least one channel.
    PubSub,
}

/// A connection's registration; dropping it unregisters the connection and its
/// subscriptions.
pub struct Registration {
    clients: Arc<Clients>,
    id: u64,
    /// Notified when the connection is to close (`CLIENT KILL`, a full inbox).
    pub kill: Arc<Notify>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut inner = self.clients.lock();
        inner.clients.remove(&self.id);
        inner.channels.retain(|_, subscribers| {
            subscribers.remove(&self.id);
            !subscribers.is_empty()
        });
    }
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers connection `id` until the registration is dropped.
    pub fn register(self: &Arc<Self>, id: u64) -> Registration {
        let kill = Arc::new(Notify::new());
        self.lock().clients.insert(id, Entry { kill: kill.clone(), subscriptions: 0 });
        Registration { clients: self.clone(), id, kill }
    }

    /// Subscribes `id` to `channel`, its messages to go to `inbox`; false if it was already.
    pub fn subscribe(&self, id: u64, channel: &[u8], inbox: &mpsc::Sender<Message>) -> bool {
        let mut inner = self.lock();
        let subscribers = inner.channels.entry(channel.to_vec()).or_default();
        if subscribers.insert(id, inbox.clone()).is_some() {
            return false;
        }
        if let Some(e) = inner.clients.get_mut(&id) {
            e.subscriptions += 1;
        }
        true
    }

    /// Unsubscribes `id` from `channel`; false if it was not subscribed.
    pub fn unsubscribe(&self, id: u64, channel: &[u8]) -> bool {
        let mut inner = self.lock();
        let Some(subscribers) = inner.channels.get_mut(channel) else { return false };
        if subscribers.remove(&id).is_none() {
            return false;
        }
        if subscribers.is_empty() {
            inner.channels.remove(channel);
        }
        if let Some(e) = inner.clients.get_mut(&id) {
            e.subscriptions = e.subscriptions.saturating_sub(1);
        }
        true
    }

    /// Puts `payload` in the inbox of every subscriber of `channel`; the number that got it.
    /// A subscriber whose inbox is full is disconnected instead.
    pub fn publish(&self, channel: &[u8], payload: &[u8]) -> usize {
        let inner = self.lock();
        let Some(subscribers) = inner.channels.get(channel) else { return 0 };
        let message = Message { channel: channel.into(), payload: payload.into() };
        let mut delivered = 0;
        for (id, inbox) in subscribers {
            match inbox.try_send(message.clone()) {
                Ok(()) => delivered += 1,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    log::warn!(
                        "client {id}: {INBOX_MESSAGES_MAX} pub/sub messages unread: disconnected"
                    );
                    if let Some(e) = inner.clients.get(id) {
                        e.kill.notify_one();
                    }
                }
                // Its connection is closing; its registration goes with it.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        delivered
    }

    /// Closes every client of `kind` but `except`; the number closed.
    pub fn kill_kind(&self, kind: Kind, except: u64) -> usize {
        let inner = self.lock();
        let mut killed = 0;
        for (id, e) in &inner.clients {
            let is = if e.subscriptions > 0 { Kind::PubSub } else { Kind::Normal };
            if *id != except && is == kind {
                e.kill.notify_one();
                killed += 1;
            }
        }
        killed
    }

    /// Closes client `id`; false if there is none.
    pub fn kill_id(&self, id: u64) -> bool {
        let inner = self.lock();
        inner.clients.get(&id).map(|e| e.kill.notify_one()).is_some()
    }
}

/// A subscribed connection's side: its inbox and the channels it subscribed to.
#[derive(Debug)]
pub struct Subscriber {
    /// Where [`Clients::publish`] puts the channels' messages.
    pub sender: mpsc::Sender<Message>,
    /// What the connection's task reads and writes out.
    pub inbox: mpsc::Receiver<Message>,
    /// The channels subscribed, in the order they were.
    pub channels: Vec<Vec<u8>>,
}

impl Subscriber {
    /// A new inbox, subscribed to nothing yet.
    pub fn new() -> Subscriber {
        let (sender, inbox) = mpsc::channel(INBOX_MESSAGES_MAX);
        Subscriber { sender, inbox, channels: Vec::new() }
    }
}

impl Default for Subscriber {
    fn default() -> Subscriber {
        Subscriber::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_reaches_subscribers_of_that_channel_only() {
        let clients = Arc::new(Clients::default());
        let (a, b) = (clients.register(1), clients.register(2));
        let (mut sa, mut sb) = (Subscriber::new(), Subscriber::new());
        assert!(clients.subscribe(1, b"ch", &sa.sender));
        assert!(!clients.subscribe(1, b"ch", &sa.sender));
        assert!(clients.subscribe(2, b"other", &sb.sender));
        assert_eq!(clients.publish(b"ch", b"hello"), 1);
        assert_eq!(&*sa.inbox.try_recv().unwrap().payload, b"hello");
        assert!(sb.inbox.try_recv().is_err());
        assert_eq!(clients.kill_kind(Kind::PubSub, 0), 2);
        assert_eq!(clients.kill_kind(Kind::Normal, 0), 0);
        assert!(clients.unsubscribe(1, b"ch"));
        assert_eq!(clients.publish(b"ch", b"again"), 0);
        drop((a, b));
        assert_eq!(clients.publish(b"other", b"gone"), 0);
        assert!(!clients.kill_id(1));
    }

    #[test]
    fn a_full_inbox_disconnects_its_subscriber() {
        let clients = Arc::new(Clients::default());
        let reg = clients.register(7);
        let sub = Subscriber::new();
        clients.subscribe(7, b"ch", &sub.sender);
        for _ in 0..INBOX_MESSAGES_MAX {
            assert_eq!(clients.publish(b"ch", b"m"), 1);
        }
        assert_eq!(clients.publish(b"ch", b"one too many"), 0);
        let notified = reg.kill.notified();
        tokio::pin!(notified);
        // The permit stored by notify_one completes the wait at once.
        assert!(futures_ready(notified.as_mut()));
    }

    fn futures_ready<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        f.poll(&mut cx).is_ready()
    }
}
