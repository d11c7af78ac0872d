//! Makes a small volume with a few commits, for trying `shale inspect`:
//! `cargo run -p shale-space --example make_volume -- /tmp/demo-vol`.

use shale_space::{Edit, Volume, VolumeOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: make_volume DIR")?;
    let opts = VolumeOptions::small_for_tests();
    let volume = Volume::open_path(path.as_ref(), &opts, &Default::default())?.volume;
    let mut live = Vec::new();
    for n in 0..200u32 {
        let e = volume.allocate(1 + n % 3)?;
        let removed = if n % 4 == 3 { vec![live.remove(0)] } else { vec![] };
        let edit =
            Edit { removed, added: vec![e], engine: n.to_le_bytes().to_vec(), ..Edit::default() };
        volume.commit(&edit, &mut || n.to_le_bytes().to_vec())?;
        live.push(e);
    }
    println!("made a volume at {path} with 200 commits");
    Ok(())
}
