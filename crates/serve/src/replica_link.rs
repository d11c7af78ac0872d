//! A replica's link to its master, in Redis's replication protocol (issue #46, part 2): the
//! handshake a Redis replica makes, the full resync's snapshot, then the master's command
//! stream with the replication offset it advances. It speaks to a Redis 7 master
//! (`tests/replica_link.rs` runs one) and is what a `shale serve` replica will run; applying
//! the snapshot and the commands to a store is the caller's.
//!
//! ```text
//! replica -> master                      master -> replica
//! PING                                   +PONG (-NOAUTH from a master with a password)
//! AUTH [<user>] <password>               +OK   (only with a password to give)
//! REPLCONF listening-port <port>         +OK
//! REPLCONF capa eof capa psync2          +OK
//! PSYNC ? -1                             +FULLRESYNC <replid> <offset>
//! (or PSYNC <replid> <offset+1>          +CONTINUE [<replid>], then the stream)
//!                                        ("\n" keep-alives while the snapshot is made)
//!                                        $<len>\r\n<len bytes of RDB>          (from disk)
//!                                        or $EOF:<40-byte mark>\r\n<RDB><mark>  (diskless)
//!                                        then commands, as RESP arrays; each one's bytes
//!                                        advance the offset, REPLCONF GETACK * included
//! REPLCONF ACK <offset>                  (no reply; the first, right after the snapshot,
//!                                        starts a diskless master's stream)
//! ```

use std::fmt;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::resp::{Limits, ProtocolError, Request, RequestParser};

/// Most bytes of a handshake reply line.
const LINE_BYTES_MAX: usize = 1024;
/// How often a replica acknowledges its offset while the master is silent (Redis's replicas:
/// once a second).
const ACK_EVERY: Duration = Duration::from_secs(1);
/// Bytes of a diskless transfer's end mark.
const EOF_MARK_BYTES: usize = 40;

/// Why the link failed.
#[derive(Debug)]
pub enum LinkError {
    /// The connection's error.
    Io(std::io::Error),
    /// The master answered a handshake step otherwise than Redis does.
    Handshake {
        /// The step.
        step: &'static str,
        /// What the master said.
        reply: String,
    },
    /// The command stream is not RESP.
    Protocol(ProtocolError),
    /// The master closed the connection.
    Closed,
    /// No byte came for this long.
    Timeout(Duration),
    /// The master wants a password the link does not have, or refused the one it gave.
    Auth(String),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Io(e) => write!(f, "replication link: {e}"),
            LinkError::Handshake { step, reply } => {
                write!(f, "replication handshake: {step} answered {reply:?}")
            }
            LinkError::Protocol(e) => write!(f, "replication stream: {e}"),
            LinkError::Closed => write!(f, "replication link: the master closed the connection"),
            LinkError::Timeout(d) => {
                write!(f, "replication link: nothing from the master for {d:?}")
            }
            LinkError::Auth(why) => write!(f, "replication link: authentication: {why}"),
        }
    }
}

impl std::error::Error for LinkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LinkError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for LinkError {
    fn from(e: std::io::Error) -> LinkError {
        LinkError::Io(e)
    }
}

/// What the link gives a master that has a password (Redis's `masterauth` and
/// `masteruser`).
#[derive(Clone, PartialEq, Eq)]
pub struct MasterAuth {
    /// The user, for `AUTH user password`; `None` sends `AUTH password` (the `default` user).
    pub user: Option<String>,
    /// The password.
    pub password: String,
}

impl fmt::Debug for MasterAuth {
    // Never the password: a Debug print ends up in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterAuth").field("user", &self.user).finish_non_exhaustive()
    }
}

/// What the master sent to start the replica off.
#[derive(Debug)]
pub struct FullResync {
    /// The master's replication id.
    pub replid: String,
    /// The replication offset the snapshot is at: the stream's first command follows it.
    pub offset: u64,
    /// The snapshot, an RDB file (`crate::rdb::decode` reads it).
    pub rdb: Vec<u8>,
}

/// How a master answered `PSYNC`.
#[derive(Debug)]
pub enum Resync {
    /// A snapshot, then the stream after it.
    Full(FullResync),
    /// `+CONTINUE`: the stream from the offset asked for.
    Continued,
}

/// A replica's connection to its master, past the handshake.
pub struct Link {
    stream: TcpStream,
    buf: Vec<u8>,
    parser: RequestParser,
    /// The master's replication id.
    replid: String,
    /// The offset of the last command handed out: the snapshot's, plus every stream byte since.
    offset: u64,
    idle_timeout: Duration,
    /// The offset before a `REPLCONF GETACK` that [`Link::next_buffered`] handed out, until
    /// [`Link::ack_getack`] answers it.
    getack_at: Option<u64>,
    /// The bytes of the commands handed out since [`Link::take_raw`] last took them: what a
    /// replica passes on to its own replicas, as its master sent them.
    raw: Vec<u8>,
}

impl Link {
    /// Connects to the master at `addr`, makes the handshake as a replica listening on
    /// `listening_port` (what the master reports in `INFO replication`), and asks for a full
    /// resync; returns the link, positioned at the stream's first command, and the snapshot.
    /// Each step waits at most `timeout` for the master.
    ///
    /// # Errors
    /// [`LinkError`]: the connection's, the master's refusal of a step (an `-NOAUTH` or
    /// `-ERR` reply), or silence past `timeout`.
    pub async fn full_resync(
        addr: &str,
        listening_port: u16,
        timeout: Duration,
    ) -> Result<(Link, FullResync), LinkError> {
        match Link::resync(addr, listening_port, timeout, None, None).await? {
            (mut link, Resync::Full(full)) => {
                // A master that sent the snapshot diskless starts the stream only once the
                // replica acknowledges it (`next_command` acknowledges again every second of
                // silence, for a master that took it online after this one).
                link.ack().await?;
                Ok((link, full))
            }
            (_, Resync::Continued) => {
                Err(LinkError::Handshake { step: "PSYNC", reply: "+CONTINUE".into() })
            }
        }
    }

    /// As [`Link::full_resync`], but asking first to continue from `from`, the master's
    /// replication id and the offset the replica applied (`PSYNC id offset+1`, Redis's
    /// offsets): the master answers `+CONTINUE` and the stream from there if its backlog
    /// holds it, a full resync otherwise. After a full resync the caller acknowledges the
    /// snapshot ([`Link::ack`]) once it has loaded it: a diskless master starts the stream
    /// only then. With `auth`, the link authenticates after its `PING`, as a Redis replica
    /// with `masterauth` does.
    ///
    /// # Errors
    /// As [`Link::full_resync`]; [`LinkError::Auth`] when the master wants a password and
    /// none was given, or refuses the one given (its reply quoted).
    pub async fn resync(
        addr: &str,
        listening_port: u16,
        timeout: Duration,
        from: Option<(&str, u64)>,
        auth: Option<&MasterAuth>,
    ) -> Result<(Link, Resync), LinkError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| LinkError::Timeout(timeout))??;
        stream.set_nodelay(true)?;
        let mut link = Link {
            stream,
            buf: Vec::new(),
            parser: RequestParser::new(Limits::default()),
            replid: String::new(),
            offset: 0,
            idle_timeout: timeout,
            getack_at: None,
            raw: Vec::new(),
        };
        // A master with a password answers the PING `-NOAUTH` (Redis's replica takes that as
        // a sign of life too, and authenticates next).
        link.send(&[b"PING"]).await?;
        let pong = link.line().await?;
        let noauth = pong.starts_with("-NOAUTH");
        if pong != "+PONG" && !noauth {
            return Err(LinkError::Handshake { step: "PING", reply: pong });
        }
        match auth {
            Some(a) => {
                let mut args: Vec<&[u8]> = vec![b"AUTH"];
                if let Some(user) = &a.user {
                    args.push(user.as_bytes());
                }
                args.push(a.password.as_bytes());
                link.send(&args).await?;
                let reply = link.line().await?;
                if reply != "+OK" {
                    return Err(LinkError::Auth(format!("the master answered AUTH {reply:?}")));
                }
            }
            None if noauth => {
                return Err(LinkError::Auth(format!(
                    "the master requires a password ({pong:?}), and none is set: give \
                     --masterauth_file, SHALE_MASTERAUTH or --masterauth, or CONFIG SET \
                     masterauth"
                )));
            }
            None => {}
        }
        let port = listening_port.to_string();
        link.step(
            "REPLCONF listening-port",
            &[b"REPLCONF", b"listening-port", port.as_bytes()],
            |r| r == "+OK",
        )
        .await?;
        link.step("REPLCONF capa", &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"], |r| {
            r == "+OK"
        })
        .await?;
        match from {
            Some((replid, offset)) => {
                let next = (offset + 1).to_string();
                link.send(&[b"PSYNC", replid.as_bytes(), next.as_bytes()]).await?;
            }
            None => link.send(&[b"PSYNC", b"?", b"-1"]).await?,
        }
        let reply = link.line().await?;
        let mut words = reply.split(' ');
        if let (Some((replid, offset)), Some("+CONTINUE")) = (from, words.clone().next()) {
            // Redis 7 names its id (a new one after a failover); an older master does not.
            words.next();
            link.replid = words.next().unwrap_or(replid).to_string();
            link.offset = offset;
            return Ok((link, Resync::Continued));
        }
        let (Some("+FULLRESYNC"), Some(replid), Some(offset), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(LinkError::Handshake { step: "PSYNC", reply });
        };
        let offset = offset
            .parse()
            .map_err(|_| LinkError::Handshake { step: "PSYNC", reply: reply.clone() })?;
        let rdb = link.snapshot().await?;
        link.replid = replid.to_string();
        link.offset = offset;
        // Not acknowledged here: the caller acknowledges ([`Link::ack`]) once it has loaded
        // the snapshot, so that a master's WAIT never counts a replica still loading it.
        Ok((link, Resync::Full(FullResync { replid: replid.to_string(), offset, rdb })))
    }

    /// The master's replication id.
    pub fn replid(&self) -> &str {
        &self.replid
    }

    /// The replication offset: the snapshot's, plus the bytes of every command handed out.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The bytes of the commands handed out since the last call, as the master sent them
    /// (whole commands, `REPLCONF GETACK` and `PING` included): they advanced
    /// [`Link::offset`] by their length.
    pub fn take_raw(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.raw)
    }

    /// The master's next command, after which [`Link::offset`] counts its bytes. A
    /// `REPLCONF GETACK` is answered here (with the offset before it, as a Redis replica
    /// answers) and handed out too.
    ///
    /// # Errors
    /// [`LinkError`]: the connection's, a stream that is not RESP, or silence past the
    /// timeout given at connection (a master pings its replicas every 10 s by default).
    pub async fn next_command(&mut self) -> Result<Request, LinkError> {
        loop {
            let mut consumed = 0;
            let parsed = self.parser.next(&self.buf, &mut consumed).map_err(LinkError::Protocol)?;
            self.raw.extend(self.buf.drain(..consumed));
            let before = self.offset;
            self.offset += consumed as u64;
            if let Some(cmd) = parsed {
                if is_getack(&cmd) {
                    self.ack_at(before).await?;
                }
                return Ok(cmd);
            }
            self.fill_acking().await?;
        }
    }

    /// The master's next command if its bytes are already read, without waiting or
    /// acknowledging anything: a replica applies what came in one read as one batch and
    /// calls [`Link::next_command`] (which may acknowledge) only once it has written them. A
    /// `REPLCONF GETACK` is handed out unanswered here: the caller answers it with
    /// [`Link::ack_getack`] once everything before it is applied.
    ///
    /// # Errors
    /// [`LinkError::Protocol`]: a stream that is not RESP.
    pub fn next_buffered(&mut self) -> Result<Option<Request>, LinkError> {
        let mut consumed = 0;
        let parsed = self.parser.next(&self.buf, &mut consumed).map_err(LinkError::Protocol)?;
        self.raw.extend(self.buf.drain(..consumed));
        let before = self.offset;
        self.offset += consumed as u64;
        if let Some(cmd) = &parsed {
            if is_getack(cmd) {
                self.getack_at = Some(before);
            }
        }
        Ok(parsed)
    }

    /// Answers a `REPLCONF GETACK` that [`Link::next_buffered`] handed out (with the offset
    /// before it, as a Redis replica answers); nothing if none is waiting.
    ///
    /// # Errors
    /// The connection's.
    pub async fn ack_getack(&mut self) -> Result<(), LinkError> {
        match self.getack_at.take() {
            Some(at) => self.ack_at(at).await,
            None => Ok(()),
        }
    }

    /// Reads more bytes, acknowledging the offset every [`ACK_EVERY`] of silence as a Redis
    /// replica does. Besides telling the master where the replica is, a master that sent the
    /// snapshot diskless starts the stream on an ACK that comes once it has taken the replica
    /// online, which may be after the first one.
    async fn fill_acking(&mut self) -> Result<(), LinkError> {
        let mut waited = Duration::ZERO;
        loop {
            let step = ACK_EVERY.min(self.idle_timeout - waited);
            match self.fill_within(step).await {
                Err(LinkError::Timeout(_)) if waited + step < self.idle_timeout => {
                    waited += step;
                    self.ack().await?;
                }
                Err(LinkError::Timeout(_)) => return Err(LinkError::Timeout(self.idle_timeout)),
                other => return other,
            }
        }
    }

    /// Tells the master the offset applied so far (`REPLCONF ACK`): what its `WAIT` counts.
    ///
    /// # Errors
    /// The connection's.
    pub async fn ack(&mut self) -> Result<(), LinkError> {
        self.ack_at(self.offset).await
    }

    async fn ack_at(&mut self, offset: u64) -> Result<(), LinkError> {
        let offset = offset.to_string();
        self.send(&[b"REPLCONF", b"ACK", offset.as_bytes()]).await
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<(), LinkError> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out).await?;
        Ok(())
    }

    async fn step(
        &mut self,
        step: &'static str,
        args: &[&[u8]],
        ok: impl Fn(&str) -> bool,
    ) -> Result<(), LinkError> {
        self.send(args).await?;
        let reply = self.line().await?;
        if ok(&reply) { Ok(()) } else { Err(LinkError::Handshake { step, reply }) }
    }

    /// Reads more bytes into the buffer, waiting at most the link's timeout.
    async fn fill(&mut self) -> Result<(), LinkError> {
        self.fill_within(self.idle_timeout).await
    }

    async fn fill_within(&mut self, limit: Duration) -> Result<(), LinkError> {
        let mut chunk = [0u8; 16 << 10];
        let n = tokio::time::timeout(limit, self.stream.read(&mut chunk))
            .await
            .map_err(|_| LinkError::Timeout(limit))??;
        if n == 0 {
            return Err(LinkError::Closed);
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// The next non-empty reply line, without its CRLF (the empty lines are the master's
    /// keep-alives while it prepares the snapshot).
    async fn line(&mut self) -> Result<String, LinkError> {
        loop {
            if let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=end).collect();
                let text =
                    String::from_utf8_lossy(&line).trim_end_matches(['\r', '\n']).to_string();
                if text.is_empty() {
                    continue;
                }
                return Ok(text);
            }
            if self.buf.len() > LINE_BYTES_MAX {
                let reply = String::from_utf8_lossy(&self.buf[..64]).into_owned();
                return Err(LinkError::Handshake { step: "reply line", reply });
            }
            self.fill().await?;
        }
    }

    /// The snapshot after `+FULLRESYNC`: a bulk of known length, or a diskless transfer
    /// ended by its mark.
    async fn snapshot(&mut self) -> Result<Vec<u8>, LinkError> {
        let header = self.line().await?;
        let Some(spec) = header.strip_prefix('$') else {
            return Err(LinkError::Handshake { step: "snapshot", reply: header });
        };
        if let Some(mark) = spec.strip_prefix("EOF:") {
            let mark = mark.as_bytes().to_vec();
            if mark.len() != EOF_MARK_BYTES {
                return Err(LinkError::Handshake { step: "snapshot", reply: header });
            }
            loop {
                if self.buf.len() >= EOF_MARK_BYTES && self.buf.ends_with(&mark) {
                    let mut rdb = std::mem::take(&mut self.buf);
                    rdb.truncate(rdb.len() - EOF_MARK_BYTES);
                    return Ok(rdb);
                }
                // The stream begins only after the replica's first ACK (below), so the mark
                // ends what has arrived once it has arrived whole.
                self.fill().await?;
            }
        }
        let len: usize = spec
            .parse()
            .map_err(|_| LinkError::Handshake { step: "snapshot", reply: header.clone() })?;
        while self.buf.len() < len {
            self.fill().await?;
        }
        let rest = self.buf.split_off(len);
        Ok(std::mem::replace(&mut self.buf, rest))
    }
}

fn is_getack(cmd: &Request) -> bool {
    cmd.len() == 3
        && cmd[0].eq_ignore_ascii_case(b"REPLCONF")
        && cmd[1].eq_ignore_ascii_case(b"GETACK")
}
