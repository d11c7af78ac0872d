//! The release queue under shuttle (`lsm/src/sst/release_queue.rs`): callers' threads hand
//! jobs (dropped SSTs to give back) to one serving thread, and some wait until the queue is
//! idle (a closing store, `Db::check`). Checked: every job runs exactly once; a caller's
//! `wait_idle` returns only once each job it handed before is done, including one the server
//! has taken off the queue and is still running; the serving thread ends after the close
//! with nothing left behind. Without the "running" mark, `wait_idle` returns while the last
//! job runs, and the first test fails.

use std::sync::Arc;

use shale_lsm_model::release_queue::ReleaseQueue;
use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const ITERATIONS: usize = 2000;
const PCT_DEPTH: usize = 3;

/// A job: done once run; run twice is a bug.
#[derive(Default)]
struct Job {
    done: AtomicBool,
    runs: AtomicUsize,
}

fn run_job(job: Arc<Job>) {
    // A point where the server may be switched out mid-job.
    shuttle::thread::yield_now();
    job.runs.fetch_add(1, Ordering::SeqCst);
    job.done.store(true, Ordering::SeqCst);
}

/// `callers` threads hand `jobs` jobs each, then wait until the queue is idle and check
/// their own jobs are done; then the queue closes and the server is joined.
fn hand_wait_close(callers: usize, jobs: usize) {
    let queue = Arc::new(ReleaseQueue::<Arc<Job>>::default());
    let server = {
        let queue = queue.clone();
        shuttle::thread::spawn(move || queue.serve(run_job))
    };
    let mut threads = Vec::new();
    let mut all = Vec::new();
    for _ in 0..callers {
        let mine: Vec<Arc<Job>> = (0..jobs).map(|_| Arc::new(Job::default())).collect();
        all.extend(mine.iter().cloned());
        let queue = queue.clone();
        threads.push(shuttle::thread::spawn(move || {
            for j in &mine {
                queue.hand(j.clone());
            }
            queue.wait_idle();
            for j in &mine {
                assert!(j.done.load(Ordering::SeqCst), "wait_idle returned before a job was done");
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    queue.close();
    server.join().unwrap();
    for j in &all {
        assert_eq!(j.runs.load(Ordering::SeqCst), 1, "a job ran other than once");
    }
    assert_eq!(queue.handed(), (callers * jobs) as u64);
}

#[test]
fn wait_idle_returns_once_every_job_handed_before_is_done() {
    let run = || hand_wait_close(2, 2);
    shuttle::check_random(run, ITERATIONS);
    shuttle::check_pct(run, ITERATIONS, PCT_DEPTH);
}

#[test]
fn a_close_with_jobs_queued_runs_them_all_before_the_thread_ends() {
    // Jobs handed and nobody waiting: the close comes while they are queued or running.
    let run = || {
        let queue = Arc::new(ReleaseQueue::<Arc<Job>>::default());
        let server = {
            let queue = queue.clone();
            shuttle::thread::spawn(move || queue.serve(run_job))
        };
        let jobs: Vec<Arc<Job>> = (0..3).map(|_| Arc::new(Job::default())).collect();
        for j in &jobs {
            queue.hand(j.clone());
        }
        queue.close();
        server.join().unwrap();
        for j in &jobs {
            assert_eq!(j.runs.load(Ordering::SeqCst), 1, "a queued job was left at the close");
        }
    };
    shuttle::check_random(run, ITERATIONS);
    shuttle::check_pct(run, ITERATIONS, PCT_DEPTH);
}
