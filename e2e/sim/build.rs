//! Compiles the vendored Kubernetes `.proto` files (`proto/`) into one encoded
//! `FileDescriptorSet` in `OUT_DIR`, which `src/protobuf/` loads with prost-reflect to map
//! protobuf bodies to JSON and back. protox is a pure-Rust compiler: no `protoc` is needed.

use std::path::{Path, PathBuf};

use prost::Message;

fn proto_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            proto_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    proto_files(&root, &mut files)?;
    // Sorted so the descriptor set, and so the build, is reproducible.
    files.sort();
    let set = protox::compile(&files, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("kubernetes.fds");
    std::fs::write(out, set.encode_to_vec())?;
    Ok(())
}
