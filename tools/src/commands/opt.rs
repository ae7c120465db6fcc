//! `tlc opt FILE --passes=p1,p2`: run chosen passes on a kernel of any level and print the
//! resulting IR, with the pass manager's instrumentation (IR prints and the timing table go
//! to stderr, dumps to `--dump-dir`).

use crate::cli::InstrumentFlags;
use crate::tunables::{self, Tuning};
use std::path::Path;
use tlc::frontend::UserError;
use tlc_ir::Target;
use tlc_passes::{parse_pipeline, PassContext, PassManager};

pub fn run(
    path: &Path,
    defines: &[String],
    passes: &str,
    (target, sms): (Target, Option<i64>),
    flags: &InstrumentFlags,
    tuning: &Tuning,
) -> Result<String, UserError> {
    let pipeline =
        parse_pipeline(passes).map_err(|e| UserError::plain(format!("`--passes`: {e}")))?;
    let manager = PassManager::new(pipeline, flags.options()).map_err(UserError::plain)?;
    let (file, func, info) = tunables::load(path, defines, tuning)?;
    let mut cx = PassContext::new(target).with_info(info);
    if let Some(sms) = sms {
        cx = cx.with_sms(sms);
    }
    let mut stderr = std::io::stderr().lock();
    match manager.run(func, &mut cx, &mut stderr) {
        Ok(func) => Ok(tlc_ir::printer::print_func(&func)),
        Err(e) => Err(tlc::driver::pipeline_error(&file, e)),
    }
}
