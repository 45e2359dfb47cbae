//! `moniker-eight-bit IN OUT`: writes the `model.safetensors` IN with its matrices at eight bits
//! a value (`moniker_model::eight_bit_file`) to OUT: what the packages that carry search's
//! model hold (packaging/pypi-model/build.py, packaging/npm/model.sh, the release archives).

#![allow(clippy::print_stderr)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: moniker-eight-bit IN/model.safetensors OUT/model.safetensors");
        return ExitCode::from(2);
    };
    let written = std::fs::read(input)
        .map_err(|e| format!("{input}: {e}"))
        .and_then(|weights| moniker_model::eight_bit_file(&weights).map_err(|e| e.to_string()))
        .and_then(|bytes| std::fs::write(output, bytes).map_err(|e| format!("{output}: {e}")));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("moniker-eight-bit: {why}");
            ExitCode::FAILURE
        }
    }
}
