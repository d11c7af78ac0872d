//! The spelling of the command line's flags, and the old spellings still accepted.
//!
//! The rule (docs/cli.md, "Flag names"): a flag takes the name its yardstick gives it where
//! there is one (db_bench's for `bench`, `kvbench` and the engines' sizes, YCSB's property
//! names for `ycsb`, redis-server's for `serve`: `--requirepass`, `--protected-mode`,
//! `--proto-max-bulk-len`, ...), and snake_case everywhere else (`--queue_depth`,
//! `--capacity_path`), as db_bench spells its own. A flag renamed to follow the rule keeps
//! its old spelling for one release: it is rewritten here, before parsing, with a warning
//! naming the new one, so scripts keep running and say what to change.

use std::ffi::OsString;

/// Renamed flags: (command, old spelling, new spelling), without the leading dashes.
const RENAMED: &[(&str, &str, &str)] = &[
    ("iobench", "block-size", "block_size"),
    ("iobench", "queue-depth", "queue_depth"),
    ("serve", "requirepass-file", "requirepass_file"),
];

/// `argv` with every old spelling of its command's flags replaced by the new one (as
/// `--old` or `--old=value`), and a warning for each (once per flag).
pub fn respell(argv: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
    let Some(command) = argv.get(1).and_then(|c| c.to_str()).map(str::to_owned) else {
        return (argv, Vec::new());
    };
    let mut warnings = Vec::new();
    let mut out = Vec::with_capacity(argv.len());
    let mut after_double_dash = false;
    for (i, arg) in argv.into_iter().enumerate() {
        let text = arg.to_str();
        if i < 2 || after_double_dash || text.is_none() {
            out.push(arg);
            continue;
        }
        let text = text.expect("checked above");
        if text == "--" {
            after_double_dash = true;
            out.push(arg);
            continue;
        }
        let (name, value) = match text.strip_prefix("--") {
            Some(rest) => rest.split_once('=').map_or((rest, None), |(n, v)| (n, Some(v))),
            None => {
                out.push(arg);
                continue;
            }
        };
        match RENAMED.iter().find(|(c, old, _)| *c == command && *old == name) {
            Some((_, old, new)) => {
                let warning = format!(
                    "shale {command}: warning: --{old} is spelled --{new} now; the old spelling \
                     is accepted until the next release"
                );
                if !warnings.contains(&warning) {
                    warnings.push(warning);
                }
                out.push(match value {
                    Some(v) => format!("--{new}={v}").into(),
                    None => format!("--{new}").into(),
                });
            }
            None => out.push(arg),
        }
    }
    (out, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn old_spellings_become_new_ones_with_one_warning_each() {
        let (out, warnings) = respell(argv(&[
            "shale",
            "iobench",
            "--queue-depth",
            "8",
            "--block-size=64k",
            "--queue-depth=4",
            "--path",
            "--queue-depth",
        ]));
        assert_eq!(
            out,
            argv(&[
                "shale",
                "iobench",
                "--queue_depth",
                "8",
                "--block_size=64k",
                "--queue_depth=4",
                "--path",
                "--queue_depth",
            ])
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("--queue-depth is spelled --queue_depth"), "{warnings:?}");
    }

    #[test]
    fn other_commands_values_and_what_follows_a_double_dash_are_left_alone() {
        for args in [
            &["shale", "bench", "--queue-depth", "3"][..],
            &["shale", "iobench", "--", "--queue-depth"],
            &["shale", "serve", "--protected-mode", "no"],
            &["shale"],
        ] {
            let (out, warnings) = respell(argv(args));
            assert_eq!(out, argv(args));
            assert!(warnings.is_empty());
        }
    }
}
