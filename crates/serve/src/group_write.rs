//! The group commit's write through the engine: a group of queued batches (commit.rs) as one
//! synced engine batch, through [`Keyspace::write`], with their effects fed to the replication
//! stream. Kept apart from commit.rs so that the model of the group commit
//! (`crates/serve-model`) checks commit.rs with a stand-in for this one step.

use shale_lsm::WriteBatch;

use crate::commit::{Commits, GroupWriter, Queued};
use crate::keyspace::{Keyspace, engine_key};
use crate::replication::{encode_command, encode_write};

impl GroupWriter for Keyspace {
    fn commits(&self) -> &Commits {
        Keyspace::commits(self)
    }

    async fn write_group(&self, group: &[&Queued]) -> Result<u64, String> {
        let mut batch = WriteBatch::new();
        for q in group {
            for (key, value) in &q.entries {
                match value {
                    Some(v) => batch.put(&engine_key(key), &v.encode()),
                    None => batch.delete(&engine_key(key)),
                }
            }
            if let Some((key, value)) = &q.server_entry {
                batch.put(key, value);
            }
        }
        if batch.is_empty() {
            return Ok(0);
        }
        // Each batch's effects as run.rs fed a run's batch: one command a key, several in
        // MULTI/EXEC, so that a replica applies each batch whole; in queue order.
        let effects = |out: &mut Vec<u8>| {
            for q in group {
                let several = q.entries.len() > 1;
                if several {
                    encode_command(out, &[b"MULTI"]);
                }
                for (key, value) in &q.entries {
                    encode_write(out, key, value.as_ref());
                }
                if several {
                    encode_command(out, &[b"EXEC"]);
                }
            }
        };
        self.write(&batch, effects).await.map_err(|e| shale_io::Chain(&e).to_string())
    }
}
