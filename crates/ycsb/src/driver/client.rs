//! One client thread: its operations, each timed around the engine calls (YCSB's
//! `CoreWorkload.doInsert` / `doTransaction*` with the timing of its `DBWrapper`).
//!
//! What an operation's latency covers: the engine calls and the record's encoding, decoding
//! and merging, which YCSB's binding layer does inside its measured call. Choosing the key and
//! generating random field bytes happen before the clock starts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;

use crate::config::Config;
use crate::driver::choosers::{KeyChooser, OperationChooser, ScanLengthChooser};
use crate::engine::{Engine, EngineError};
use crate::generator::{AcknowledgedCounterGenerator, CounterGenerator, UniformLongGenerator};
use crate::record::{self, RecordLayout};
use crate::report::{ERRORS_KEPT, OpReport, Status};
use crate::workload::Operation;

/// Where a thread's counts go, and its first errors.
pub struct ThreadStats {
    /// Indexed like [`Operation::ALL`].
    pub ops: Vec<OpReport>,
    pub errors: Vec<String>,
}

impl ThreadStats {
    fn new() -> ThreadStats {
        ThreadStats { ops: Operation::ALL.map(OpReport::new).to_vec(), errors: Vec::new() }
    }

    fn record(&mut self, op: Operation, status: Status, latency: Duration) {
        let i = Operation::ALL.iter().position(|o| *o == op).expect("every operation is listed");
        self.ops[i].record(status, latency);
    }

    fn error(&mut self, op: Operation, key: &str, e: &EngineError) {
        if self.errors.len() < ERRORS_KEPT {
            self.errors.push(format!("{op} {key}: {}", shale_io::Chain(&**e)));
        }
    }
}

/// A thread's reusable state: its generator, choosers and buffers.
pub struct Client<'a, E: Engine + ?Sized> {
    engine: &'a E,
    config: &'a Config,
    rng: SmallRng,
    key: String,
    record: Vec<u8>,
    merged: Vec<u8>,
    field: Vec<u8>,
    fields: UniformLongGenerator,
    pub stats: ThreadStats,
}

impl<'a, E: Engine + ?Sized> Client<'a, E> {
    pub fn new(engine: &'a E, config: &'a Config, rng: SmallRng) -> Client<'a, E> {
        let fields = UniformLongGenerator::new(0, config.layout.field_count as u64 - 1);
        Client {
            engine,
            config,
            rng,
            key: String::new(),
            record: Vec::new(),
            merged: Vec::new(),
            field: vec![0; config.layout.field_length],
            fields,
            stats: ThreadStats::new(),
        }
    }

    /// The load phase's insert: the next record number, a fresh record.
    pub fn load_one(&mut self, keys: &CounterGenerator) {
        let keynum = keys.next_value();
        self.insert(keynum);
    }

    /// Inserts record `keynum` with fresh random fields.
    fn insert(&mut self, keynum: u64) {
        self.config.key_format.write_key(keynum, &mut self.key);
        self.config.layout.build_record(&mut self.rng, &mut self.record);
        let started = Instant::now();
        let result = self.engine.insert(self.key.as_bytes(), &self.record);
        let latency = started.elapsed();
        let status = self.status_of(Operation::Insert, result.map(|()| Status::Ok));
        self.stats.record(Operation::Insert, status, latency);
    }

    /// The run phase's next operation.
    pub fn run_one(&mut self, run: &mut RunState) {
        let op = run.operations.next(&mut self.rng);
        if op == Operation::Insert {
            // Acknowledged whatever the outcome, as YCSB's `finally`: a failed insert must not
            // hold back "latest" forever.
            let keynum = run.inserts.next_value();
            self.insert(keynum);
            run.inserts.acknowledge(keynum);
            return;
        }
        let keynum = run.keys.next(&run.inserts, &mut self.rng);
        self.config.key_format.write_key(keynum, &mut self.key);
        match op {
            Operation::Read => {
                self.read();
            }
            Operation::Update => {
                self.update();
            }
            Operation::Scan => {
                let len = run.scan_lengths.next(&mut self.rng);
                self.scan(len);
            }
            Operation::ReadModifyWrite => {
                let started = Instant::now();
                let mut status = self.read();
                if status == Status::Ok {
                    status = self.update();
                }
                self.stats.record(Operation::ReadModifyWrite, status, started.elapsed());
            }
            Operation::Insert => unreachable!("inserts return above"),
        }
    }

    /// Reads the record under `self.key` and checks that it decodes.
    fn read(&mut self) -> Status {
        let started = Instant::now();
        let result = self.engine.read(self.key.as_bytes()).and_then(|found| match found {
            None => Ok(Status::NotFound),
            Some(rec) => record::decode_fields(&rec).map(|_| Status::Ok).map_err(Into::into),
        });
        let latency = started.elapsed();
        let status = self.status_of(Operation::Read, result);
        self.stats.record(Operation::Read, status, latency);
        status
    }

    /// Updates the record under `self.key`: one field merged into the stored record, or a
    /// whole new record with `write_all_fields` (see [`Config::write_all_fields`]).
    fn update(&mut self) -> Status {
        if self.config.write_all_fields {
            self.config.layout.build_record(&mut self.rng, &mut self.record);
            let started = Instant::now();
            let result = self.engine.update(self.key.as_bytes(), &self.record);
            let latency = started.elapsed();
            let status = self.status_of(Operation::Update, result.map(|()| Status::Ok));
            self.stats.record(Operation::Update, status, latency);
            status
        } else {
            let field = self.fields.next_value(&mut self.rng) as usize;
            let name = RecordLayout::field_name(field);
            record::fill_random(&mut self.rng, &mut self.field);
            let started = Instant::now();
            let result = self.merge_field(name.as_bytes());
            let latency = started.elapsed();
            let status = self.status_of(Operation::Update, result);
            self.stats.record(Operation::Update, status, latency);
            status
        }
    }

    /// Reads the record, sets field `name` to `self.field`, writes it back.
    fn merge_field(&mut self, name: &[u8]) -> Result<Status, EngineError> {
        let Some(stored) = self.engine.read(self.key.as_bytes())? else {
            return Ok(Status::NotFound);
        };
        record::replace_field(&stored, name, &self.field, &mut self.merged)?;
        self.engine.update(self.key.as_bytes(), &self.merged)?;
        Ok(Status::Ok)
    }

    /// Scans `len` records from `self.key`.
    fn scan(&mut self, len: usize) {
        let started = Instant::now();
        let result = self.engine.scan(self.key.as_bytes(), len);
        let latency = started.elapsed();
        let status = self.status_of(Operation::Scan, result.map(|_| Status::Ok));
        self.stats.record(Operation::Scan, status, latency);
    }

    /// The status of an engine call's result, keeping the error's message.
    fn status_of(&mut self, op: Operation, result: Result<Status, EngineError>) -> Status {
        result.unwrap_or_else(|e| {
            self.stats.error(op, &self.key, &e);
            Status::Error
        })
    }
}

/// A run-phase thread's choosers, and the insert counter all threads share.
pub struct RunState {
    pub inserts: Arc<AcknowledgedCounterGenerator>,
    pub operations: OperationChooser,
    pub keys: KeyChooser,
    pub scan_lengths: ScanLengthChooser,
}
