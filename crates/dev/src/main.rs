use std::process::ExitCode;

fn main() -> ExitCode {
    let mut out = std::io::stdout().lock();
    match netpol_dev::run(std::env::args_os().skip(1), &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => match error.downcast_ref::<clap::Error>() {
            // Help, version and usage errors print as clap prints them.
            Some(usage) => usage.exit(),
            None => {
                eprintln!("netpol-dev: {error:#}");
                ExitCode::FAILURE
            }
        },
    }
}
