//! The README's picture (`docs/img/matrix.png`): the HTML matrix of the bundled example cluster
//! (`examples/cluster`, the cluster of the README's first command), as headless chromium draws
//! it. The test draws it afresh and checks that the page drew a matrix with both verdicts (the
//! allowed and denied cell colours cover real areas of the picture) and that the committed
//! picture has the same size. `NETPOL_UPDATE_PICTURE=1` writes the fresh picture over the
//! committed one (do that when the page's look changes).
//!
//! Without chromium the test fails with instructions, unless `NETPOL_SKIP_BROWSER=1` is set.

use std::path::{Path, PathBuf};
use std::process::Command;

const BROWSER: &str = "chromium";
const WIDTH: u32 = 1100;
const HEIGHT: u32 = 380;
/// The page's cell colours (crates/cli/src/commands/matrix html style): allowed, denied.
const ALLOWED: [u8; 3] = [0xbf, 0xe5, 0xbf];
const DENIED: [u8; 3] = [0xf2, 0xb8, 0xb5];

fn repository(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Width, height and RGB pixels of a PNG file.
fn pixels(png_file: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = std::fs::File::open(png_file)
        .unwrap_or_else(|e| panic!("{} cannot be opened: {e}", png_file.display()));
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().expect("a PNG file");
    let mut buffer = vec![0; reader.output_buffer_size().expect("a sane PNG size")];
    let frame = reader.next_frame(&mut buffer).expect("one PNG frame");
    let channels = frame.color_type.samples();
    let pixels = buffer[..frame.buffer_size()]
        .chunks(channels)
        .map(|p| match channels {
            1 | 2 => [p[0], p[0], p[0]],
            _ => [p[0], p[1], p[2]],
        })
        .collect();
    (frame.width, frame.height, pixels)
}

#[test]
fn the_readme_picture_is_the_example_clusters_html_matrix() {
    let scratch =
        std::env::temp_dir().join(format!("netpol-readme-picture-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let page = scratch.join("matrix.html");
    let fresh = scratch.join("matrix.png");

    // Run from the repository's root, so the page's title names the folder as a user would.
    let matrix = Command::new(env!("CARGO_BIN_EXE_netpol"))
        .current_dir(repository("."))
        .args(["matrix", "-f", "examples/cluster", "--output", "html"])
        .output()
        .expect("the netpol binary runs");
    assert!(
        matrix.status.success(),
        "netpol matrix: {}",
        String::from_utf8_lossy(&matrix.stderr)
    );
    std::fs::write(&page, &matrix.stdout).unwrap();

    let drawn = Command::new(BROWSER)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("profile").display()
        ))
        .arg(format!("--window-size={WIDTH},{HEIGHT}"))
        .arg(format!("--screenshot={}", fresh.display()))
        .arg(format!("file://{}", page.display()))
        .output();
    match drawn {
        Ok(out) => assert!(
            out.status.success() && fresh.exists(),
            "chromium drew no picture: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::env::var_os("NETPOL_SKIP_BROWSER").is_some_and(|v| v == "1") {
                eprintln!("skipped: {BROWSER} is not installed and NETPOL_SKIP_BROWSER=1");
                return;
            }
            panic!(
                "{BROWSER} is not installed: install it (Debian: `apt-get install -y chromium`) \
                 or set NETPOL_SKIP_BROWSER=1 to skip this test"
            );
        }
        Err(e) => panic!("cannot run {BROWSER}: {e}"),
    }

    let (width, height, fresh_pixels) = pixels(&fresh);
    assert_eq!((width, height), (WIDTH, HEIGHT), "the picture's size");
    let count = |colour: [u8; 3]| fresh_pixels.iter().filter(|p| **p == colour).count();
    // A cell is about 50×20 pixels: a drawn matrix of the example cluster has dozens of each.
    let (allowed, denied) = (count(ALLOWED), count(DENIED));
    assert!(
        allowed > 5_000 && denied > 5_000,
        "the picture shows no matrix with both verdicts ({allowed} allowed, {denied} denied pixels)"
    );

    let committed = repository("docs/img/matrix.png");
    if std::env::var_os("NETPOL_UPDATE_PICTURE").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(committed.parent().unwrap()).unwrap();
        std::fs::copy(&fresh, &committed).unwrap();
        eprintln!("wrote {}", committed.display());
    }
    let (committed_width, committed_height, _) = pixels(&committed);
    assert_eq!(
        (committed_width, committed_height),
        (WIDTH, HEIGHT),
        "docs/img/matrix.png is stale: regenerate it with NETPOL_UPDATE_PICTURE=1"
    );
    let _ = std::fs::remove_dir_all(&scratch);
}
