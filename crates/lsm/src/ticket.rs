//! Tickets of the lsm engine's asynchronous requests ([`crate::Db::submit_put`] and its kin):
//! the io layer's tickets ([`shale_io::ticket`]) carrying this crate's [`Error`]. A ticket
//! whose worker failed before answering completes with [`Error::Stopped`].

use crate::error::Error;

/// The worker's end of a [`Ticket`].
pub(crate) type Completer<T> = shale_io::ticket::Completer<T, Error>;

/// A ticket that a worker completes through its [`Completer`].
pub(crate) fn pending<T>() -> (Ticket<T>, Completer<T>) {
    shale_io::ticket::pending()
}

/// The result of an asynchronous request, to poll ([`Ticket::is_done`], [`Ticket::try_take`]),
/// wait on ([`Ticket::wait`]) or `.await` (a ticket is a [`Future`](std::future::Future),
/// under any executor). See [`shale_io::ticket::Ticket`].
///
/// ```
/// use shale_lsm::{Db, Options, WriteOptions};
///
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::small_for_tests())?;
/// let mut ticket = db.submit_put(b"k", b"v", &WriteOptions::default())?;
/// while !ticket.is_done() {
///     std::thread::yield_now(); // or do other work: the put goes on without this thread
/// }
/// assert!(ticket.try_take().expect("done").is_ok());
/// assert!(ticket.try_take().is_none(), "a result is handed out once");
/// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Awaited, under any executor (here a plain `block_on`; tokio's works the same): the
/// worker that completes the request wakes the task.
///
/// ```
/// use shale_lsm::{Db, Options, ReadOptions, WriteOptions};
///
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::small_for_tests())?;
/// let value = pollster::block_on(async {
///     db.submit_put(b"k", b"v", &WriteOptions::default())?.await?;
///     db.submit_get(b"k", &ReadOptions::default())?.await
/// })?;
/// assert_eq!(value, Some(b"v".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type Ticket<T> = shale_io::ticket::Ticket<T, Error>;

impl shale_io::ticket::Abandoned for Error {
    fn abandoned() -> Error {
        Error::Stopped("the async worker serving this request failed before answering".into())
    }
}
