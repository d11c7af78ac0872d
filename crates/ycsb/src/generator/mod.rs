//! Number generators faithful to YCSB's (`core/src/main/java/site/ycsb/generator`).
//!
//! YCSB's generators draw from a thread-local `java.util.Random`; these take the caller's
//! random number generator instead, so each client thread owns one seeded generator and a run
//! is reproducible from its seed. The counters are shared between threads (they hand out
//! record numbers), so they are atomic and take no generator.

mod counter;
mod latest;
mod uniform;
mod zipfian;

pub use counter::{ACK_WINDOW, AcknowledgedCounterGenerator, CounterGenerator};
pub use latest::SkewedLatestGenerator;
pub use uniform::UniformLongGenerator;
pub use zipfian::{
    SCRAMBLED_ITEM_COUNT, SCRAMBLED_ZETAN, ScrambledZipfianGenerator, ZIPFIAN_CONSTANT,
    ZipfianGenerator, zeta,
};
