//! `nodeip-trace doctor`: what this kernel offers and which hook each probe would use.
use std::io::Write;

use crate::probe::features::KernelFeatures;

/// Output format of doctor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoctorFormat {
    /// Human text.
    Text,
    /// One JSON object.
    Json,
}

/// Runs doctor; returns whether the tool can trace here (the exit status).
pub fn run(format: DoctorFormat, out: &mut dyn Write) -> std::io::Result<bool> {
    let features = KernelFeatures::detect(true);
    match format {
        DoctorFormat::Text => out.write_all(features.render_text().as_bytes())?,
        DoctorFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &features)?;
            out.write_all(b"\n")?;
        }
    }
    Ok(features.can_trace())
}
