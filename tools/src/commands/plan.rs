//! `tlc plan`: a kernel's configuration chosen without running anything. `FILE -D …` ranks
//! the kernel's tuning space (`tlc::plan::space`) and prints the ranking as a table or
//! JSON; `--deepgemm M N K` prints DeepGEMM's choice for its FP8 GEMM
//! (`tlc::plan::deepgemm`) as one JSON object.

use crate::cli::PlanArgs;
use std::num::NonZeroU128;
use std::path::Path;
use tlc::driver::parse_target;
use tlc::frontend::{self, UserError};
use tlc::plan::deepgemm::{self, Problem};
use tlc::plan::space::{self, Gpu};
use tlc_ir::Target;

pub fn run(args: &PlanArgs) -> Result<String, UserError> {
    if let Some(file) = &args.file {
        return run_file(file, args);
    }
    // sm_90a's usual SM count, a small positive constant: the cast is exact.
    let num_sms = args.sms.unwrap_or(Target::Sm90a.desc().sm_count as u32);
    match args.deepgemm.as_deref() {
        Some(&[m, n, k]) => {
            let problem = Problem {
                m,
                n,
                k,
                num_groups: args.groups,
                num_sms,
            };
            let config = deepgemm::best_config(&problem)
                .map_err(|e| UserError::plain(format!("`--deepgemm {m} {n} {k}`: {e}")))?;
            Ok(format!("{}\n", config.to_json()))
        }
        // clap takes exactly three values and requires FILE or the flag (the `mode` group).
        _ => Err(UserError::plain(
            "`tlc plan` needs a kernel FILE or `--deepgemm M N K`",
        )),
    }
}

/// `tlc plan FILE -D … [--target T] [--sms S] [--json]`.
fn run_file(path: &Path, args: &PlanArgs) -> Result<String, UserError> {
    let target = parse_target(&args.target)?;
    let sms = args.sms.map_or(target.desc().sm_count as u128, u128::from);
    let gpu = Gpu {
        target,
        sms: NonZeroU128::new(sms).ok_or_else(|| UserError::plain("`--sms` must be at least 1"))?,
    };
    let file = frontend::read_source(path)?;
    let func = frontend::parse(&file)?;
    let ranking = space::rank(&file, &func, &args.define, gpu)?;
    Ok(if args.json {
        format!("{}\n", ranking.to_json(gpu))
    } else {
        ranking.table(gpu)
    })
}
