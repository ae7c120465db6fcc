//! `tlc plan`: a kernel's configuration chosen without running anything. `--deepgemm M N K`
//! prints DeepGEMM's choice for its FP8 GEMM (`crate::plan::deepgemm`) as one JSON object.

use crate::cli::PlanArgs;
use crate::frontend::UserError;
use crate::plan::deepgemm::{self, Problem};
use tlc_ir::Target;

pub fn run(args: &PlanArgs) -> Result<String, UserError> {
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
        // clap takes exactly three values and requires the flag (the `mode` group).
        _ => Err(UserError::plain(
            "`tlc plan` needs `--deepgemm M N K` (the only mode yet)",
        )),
    }
}
