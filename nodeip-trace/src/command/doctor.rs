//! `nodeip-trace doctor`: what this kernel offers and which hook each probe would use.
use std::io::Write;

use crate::probe::features::KernelFeatures;
use crate::sink::{write_report, ReportFormat};

/// Runs doctor; returns whether the tool can trace here (the exit status).
pub fn run(format: ReportFormat, out: &mut dyn Write) -> std::io::Result<bool> {
    let features = KernelFeatures::detect(true);
    write_report(format, &features, KernelFeatures::render_text, out)?;
    Ok(features.can_trace())
}
