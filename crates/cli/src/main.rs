//! The `shale` command-line tool.
fn main() {}
