//! `shale serve`: a RESP2/RESP3 (Redis protocol) server over shale's lsm engine.
//!
//! Clients speak to it as to Redis (`redis-cli`, any Redis client library) over TCP or a
//! Unix socket; it serves Redis's string commands, expiry, SCAN, INFO and the connection
//! commands (docs/serve.md lists every one and its limits) from one lsm store, through the
//! engine's async API so the runtime's few threads never wait on the device.
//!
//! ```no_run
//! use std::sync::Arc;
//! use shale_lsm::{Db, Options};
//! use shale_serve::{Config, ExpiredKeys, Server};
//!
//! // Compaction drops keys whose expiry has passed (a key never read again keeps its bytes
//! // otherwise).
//! let options = Options { compaction_filter: Some(Arc::new(ExpiredKeys)), ..Options::default() };
//! let db = Db::open("/tmp/serve-demo", options)?;
//! let mut server = Server::start(db, Config::default())?; // 127.0.0.1:6379
//! println!("listening on {:?}", server.tcp_addr());
//! server.wait_for_signal()?;                            // SIGTERM or SIGINT
//! server.shutdown()?;                                   // finishes requests, closes the store
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Modules: [`resp`] (the protocol), [`value`] (the stored value format), [`expiry_filter`]
//! (expired keys dropped by compaction), [`keyspace`] (Redis
//! keys over engine keys, locks, appendfsync), [`run`] (a pipeline's commands written as one
//! batch and answered after it), [`marker`] (how serve knows its own stores),
//! [`commands`] (one module per family), [`server`] (listeners, connections, protected mode,
//! shutdown), [`descriptors`] (`--maxclients` against the open-file limit), [`config`],
//! [`glob`] (MATCH patterns), [`rdb`] (Redis's snapshot format, for replication), [`replica_link`] (a replica's
//! link to its master), [`backlog`] (the master's replication backlog), [`replication`] (the
//! master's side: the stream, resyncs, acknowledgements), [`replica`] (following a master), [`clients`] (the connected clients for `CLIENT KILL`, and
//! pub/sub).

pub mod backlog;
pub mod clients;
pub mod commands;
pub(crate) mod commit;
pub mod config;
pub mod descriptors;
pub mod error;
pub mod expiry_filter;
pub mod glob;
pub(crate) mod group_write;
pub mod keyspace;
pub mod marker;
pub mod memory;
pub mod rdb;
pub mod replica;
pub mod replica_link;
pub mod replication;
pub mod resp;
pub mod run;
pub mod server;
pub(crate) mod sync;
pub mod value;
pub(crate) mod watch;

pub use config::{AppendFsync, Config};
pub use error::{Error, Result};
pub use expiry_filter::ExpiredKeys;
pub use server::{Listeners, Server};
