//! Support shared by the fuzz targets: an allocation meter (target `decode` bounds memory by
//! input size), random policies and clusters from fuzzer bytes (targets `engine_equivalence` and
//! `render`), and nftables through libnftables in a private network namespace (`render`).

pub mod generate;
pub mod meter;
pub mod nft;
