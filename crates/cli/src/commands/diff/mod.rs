//! `netpol diff BEFORE AFTER [-f SHARED]...`: the flows whose verdict changes from one set of
//! policies to another (between pods, and between pods and nodes or the regions outside the
//! cluster that policies tell apart), each with the rule that decided it before and after, one
//! line per pair of workloads; "what breaks if I apply this?" answered before it is applied.
//!
//! BEFORE and AFTER are each a scenario file or manifests (a file or folder). `-f` names
//! manifests both sides share, typically the cluster's pods and namespaces as `kubectl get -o
//! yaml` prints them, so that BEFORE and AFTER can be two folders of policies. Exit status as
//! diff(1): 0 when nothing changes, 1 when something does, 2 when an input does not load or
//! the sides have no pod in common (nothing was compared).

use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::path::PathBuf;

mod audit;
mod common;
#[cfg(test)]
mod coverage_tests;
mod decide_sides;
mod json;
mod newcomers;
mod report;
mod text;
mod workload_groups;

pub use decide_sides::compare;
use report::PerPod;

use crate::decide::EngineArgs;
use crate::input::{load_with_stdin, ManifestArgs};
use crate::loader::{
    add_stand_ins, differ_in_policies_only, load_objects, Input, LoadErrors, Scenario, SideObjects,
    STDIN,
};
use crate::outcome::Outcome;
use crate::output::report::{write_json, TextOrJson};
use crate::probe_ports::ProbeArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `BEFORE AFTER`: the cluster before and after, each a scenario file, or a manifest file
    /// or folder. With `--cluster`, `AFTER...`: manifests applied to the live cluster (BEFORE).
    #[arg(value_name = "BEFORE AFTER | AFTER", num_args = 0..)]
    pub paths: Vec<PathBuf>,
    /// Manifests both sides share (e.g. the cluster's pods and namespaces), added to BEFORE and
    /// to AFTER; these need BEFORE and AFTER to be manifests too. With `--cluster`, more AFTER
    /// manifests.
    #[command(flatten)]
    pub shared: ManifestArgs,
    /// Probe ports: every port the policies of either side mention, unless narrowed.
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// `text` or `json`.
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: TextOrJson,
    /// One line (text) or one JSON object (`changes`) per pair of pods whose flow changes,
    /// instead of one per pair of workloads.
    #[arg(long)]
    pub per_pod: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let loaded = if args.shared.live.cluster {
        load_live(args, err)?
    } else {
        load_files(args, err)?
    };
    let Some((mut before, mut after)) = loaded else {
        return Ok(Outcome::Invalid);
    };
    // Both sides get the stand-ins either side's peers can select, so that a peer admitting
    // pods the inputs do not hold shows as their flows changing.
    let placement = args.shared.read.flags().placement;
    let stand_ins = add_stand_ins(&mut [&mut before.cluster, &mut after.cluster], &placement);
    let audit_sides = audit::would_be_sides(&before, &after);
    let Some(mut report) = compare([before, after], args.engine, args.probes, err)? else {
        return Ok(Outcome::Invalid);
    };
    report.stand_ins = stand_ins.iter().map(ToString::to_string).collect();
    let audit = match audit_sides {
        Some(sides) => match compare(sides, args.engine, args.probes, err)? {
            Some(audit) => Some(audit),
            None => return Ok(Outcome::Invalid),
        },
        None => None,
    };
    if report.input_pods() == 0 {
        // An empty diff reads as "safe" in CI; with no pods there was nothing to compare.
        writeln!(
            err,
            "error: BEFORE and AFTER have no pod (with an address) in common, so no flow to \
             compare; give the cluster's pods with -f (kubectl get pods,namespaces,nodes -A -o \
             yaml) or the workloads that run them"
        )?;
        return Ok(Outcome::Invalid);
    }
    match (args.output, args.per_pod, &audit) {
        (TextOrJson::Text, per_pod, audit) => {
            let mut out = io::BufWriter::with_capacity(1 << 16, out);
            text::write_text(&mut out, &report, per_pod)?;
            if let Some(audit) = audit {
                audit::write_text(&mut out, audit, per_pod)?;
            }
            out.flush()?;
        }
        (TextOrJson::Json, per_pod, Some(audit)) => {
            audit::write_json(out, &report, audit, per_pod)?
        }
        (TextOrJson::Json, false, None) => json::write_json(out, &report)?,
        (TextOrJson::Json, true, None) => write_json(out, &PerPod(&report))?,
    }
    // A pod new or gone is a change even where no policy treats it differently.
    Ok(if report.counts().0 == 0 && !report.pods_differ() {
        Outcome::Success
    } else {
        Outcome::Mismatch
    })
}

/// Stdin, read once if any path names it (both sides may: it is given to each).
fn read_stdin<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) -> io::Result<Vec<u8>> {
    let mut stdin = Vec::new();
    if paths.into_iter().any(|p| p.as_os_str() == STDIN) {
        io::stdin().read_to_end(&mut stdin)?;
    }
    Ok(stdin)
}

/// Writes the messages of both sides, each once (the shared manifests are read by both).
fn write_once(messages: &[u8], err: &mut dyn Write) -> io::Result<()> {
    let mut said = BTreeSet::new();
    for line in String::from_utf8_lossy(messages).lines() {
        if said.insert(line.to_owned()) {
            writeln!(err, "{line}")?;
        }
    }
    Ok(())
}

/// BEFORE and AFTER from files: scenario files or manifests, with the shared manifests.
fn load_files(args: &Args, err: &mut dyn Write) -> io::Result<Option<(Scenario, Scenario)>> {
    if !args.shared.live.delete.is_empty() {
        writeln!(err, "error: --delete needs --cluster")?;
        return Ok(None);
    }
    let [before, after] = args.paths.as_slice() else {
        writeln!(
            err,
            "error: give BEFORE AFTER ({} paths given), or --cluster AFTER...",
            args.paths.len()
        )?;
        return Ok(None);
    };
    let (before_input, after_input) = match (side(args, before), side(args, after)) {
        (Ok(before), Ok(after)) => (before, after),
        (Err(e), _) | (_, Err(e)) => {
            writeln!(err, "error: {e}")?;
            return Ok(None);
        }
    };
    let stdin = read_stdin(args.shared.filenames.iter().chain([before, after]))?;
    let flags = args.shared.read.flags();
    let mut messages = Vec::new();
    let together = match args.shared.filenames.is_empty() {
        true => common::load_common(before, after, flags.clone()),
        false => load_shared(args, [before, after], &stdin, flags.clone()),
    };
    if let Some([before, after]) = together {
        let before = report(before, &mut messages);
        let after = report(after, &mut messages);
        write_once(&messages, err)?;
        return Ok(before.zip(after));
    }
    let before = load_with_stdin(
        &before_input,
        &mut stdin.as_slice(),
        flags.clone(),
        &mut messages,
    )?;
    let after = load_with_stdin(&after_input, &mut stdin.as_slice(), flags, &mut messages)?;
    write_once(&messages, err)?;
    Ok(before.zip(after))
}

/// A side's scenario, its warnings or errors written to `messages`.
fn report(built: Result<Scenario, LoadErrors>, messages: &mut Vec<u8>) -> Option<Scenario> {
    match built {
        Ok(scenario) => {
            for warning in &scenario.warnings {
                let _ = writeln!(messages, "warning: {warning}");
            }
            Some(scenario)
        }
        Err(errors) => {
            for error in errors.0 {
                let _ = writeln!(messages, "error: {error}");
            }
            None
        }
    }
}

/// Both sides of `-f SHARED BEFORE AFTER` where BEFORE and AFTER hold policies only: the shared
/// manifests are read once and both clusters share their pods ([`Scenario::from_sides`]).
/// `None` where that does not apply (no shared manifests, a side that holds other objects, a
/// file that does not read, stdin named by both the shared manifests and a side), and the sides
/// are loaded each on its own, as before: with the same results. With shared manifests, BEFORE
/// and AFTER are manifests ([`side`] refuses scenario files).
fn load_shared(
    args: &Args,
    paths: [&PathBuf; 2],
    stdin: &[u8],
    flags: crate::loader::ReadFlags,
) -> Option<[Result<Scenario, LoadErrors>; 2]> {
    let shared = &args.shared.filenames;
    let names_stdin = |path: &PathBuf| path.as_os_str() == STDIN;
    if shared.is_empty() || (shared.iter().any(names_stdin) && paths.iter().any(|p| names_stdin(p)))
    {
        return None;
    }
    let base = load_objects(shared, &mut &stdin[..]).ok()?;
    let own = |path: &PathBuf| load_objects(std::slice::from_ref(path), &mut &stdin[..]).ok();
    let sides = [own(paths[0])?, own(paths[1])?].map(|own| SideObjects {
        deleted: Vec::new(),
        own,
    });
    if !differ_in_policies_only(&base, &sides) {
        return None;
    }
    // Named as each side's manifests are: every path, joined.
    let names = paths.map(|path| {
        shared
            .iter()
            .chain([path])
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    });
    Some(Scenario::from_sides(base, sides, names, flags))
}

/// BEFORE is the live cluster, read once; AFTER is it with the `--delete`d objects taken out and
/// the AFTER manifests (positional and `-f`) applied, as `kubectl apply` would.
fn load_live(args: &Args, err: &mut dyn Write) -> io::Result<Option<(Scenario, Scenario)>> {
    let live = &args.shared.live;
    let apply: Vec<PathBuf> = args
        .shared
        .filenames
        .iter()
        .chain(&args.paths)
        .cloned()
        .collect();
    if apply.is_empty() && live.delete.is_empty() {
        writeln!(
            err,
            "error: with --cluster, give the AFTER manifests to apply (files, folders, -) or \
             --delete KIND/NAMESPACE/NAME"
        )?;
        return Ok(None);
    }
    let snapshot = match crate::live::read(live) {
        Ok(snapshot) => snapshot,
        Err(e) => {
            writeln!(err, "error: {e}")?;
            return Ok(None);
        }
    };
    let stdin = read_stdin(&apply)?;
    let flags = args.shared.read.flags();
    let mut messages = Vec::new();
    let [before, after] = crate::live::build_sides(
        &snapshot,
        &apply,
        &live.delete,
        &mut stdin.as_slice(),
        flags,
    );
    let before = report(before, &mut messages);
    let after = report(after, &mut messages);
    write_once(&messages, err)?;
    Ok(before.zip(after))
}

/// The input of one side: with shared manifests, those and the side's own manifests.
fn side(args: &Args, path: &std::path::Path) -> Result<Input, String> {
    if args.shared.filenames.is_empty() {
        return Ok(Input::detect(path));
    }
    match Input::detect(path) {
        Input::Scenario(file) => Err(format!(
            "{}: a scenario file cannot be combined with -f manifests",
            file.display()
        )),
        Input::Manifests(own) => {
            let mut paths = args.shared.filenames.clone();
            paths.extend(own);
            Ok(Input::Manifests(paths))
        }
        Input::Live(_) => unreachable!("a path is never the live cluster"),
    }
}
