//! `cozystack-policy annotate|inspect|push|pull`: kwctl's packaging verbs for this policy.

use std::process::ExitCode;

use cozystack_packaging::{metadata, section};

const USAGE: &str = "usage:
  cozystack-policy annotate --metadata FILE --usage FILE --protocol-version V -o OUT IN
  cozystack-policy inspect WASM
  cozystack-policy artifacthub --metadata FILE [--questions FILE] [--created-at RFC3339] -o OUT
  cozystack-policy push WASM REGISTRY/REPO:TAG [--insecure]
  cozystack-policy pull REGISTRY/REPO@DIGEST -o OUT [--insecure]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Positional arguments: everything that is not a flag or a flag's value.
fn positional(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args.iter().skip(1) {
        if skip {
            skip = false;
        } else if a == "--insecure" {
        } else if a.starts_with('-') {
            skip = true;
        } else {
            out.push(a.clone());
        }
    }
    out
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{path}: {e}"))
}

fn run(args: &[String]) -> Result<(), String> {
    let need = |name: &str| flag(args, name).ok_or_else(|| format!("{name} is required\n{USAGE}"));
    let insecure = args.iter().any(|a| a == "--insecure");
    match args.first().map(String::as_str) {
        Some("annotate") => {
            let input = positional(args).pop().ok_or(USAGE)?;
            let text = String::from_utf8(read(&need("--metadata")?)?).map_err(|e| e.to_string())?;
            let usage = String::from_utf8(read(&need("--usage")?)?).map_err(|e| e.to_string())?;
            let meta = metadata::annotated(
                metadata::from_yaml(&text).map_err(|e| e.to_string())?,
                &need("--protocol-version")?,
                &usage,
            );
            let out = section::write_metadata(&read(&input)?, &meta).map_err(|e| e.to_string())?;
            std::fs::write(need("-o")?, out).map_err(|e| e.to_string())
        }
        Some("artifacthub") => {
            let text = String::from_utf8(read(&need("--metadata")?)?).map_err(|e| e.to_string())?;
            let meta = metadata::from_yaml(&text).map_err(|e| e.to_string())?;
            let out = need("-o")?;
            let questions = flag(args, "--questions").map(|p| read(&p)).transpose()?;
            let questions = questions
                .map(String::from_utf8)
                .transpose()
                .map_err(|e| e.to_string())?;
            // Keep the previous createdAt unless one is given: regenerating must be reproducible.
            let created = flag(args, "--created-at")
                .or_else(|| {
                    std::fs::read_to_string(&out)
                        .ok()
                        .and_then(|t| cozystack_packaging::artifacthub::created_at(&t))
                })
                .ok_or("--created-at is required for a new package")?;
            let doc =
                cozystack_packaging::artifacthub::package(&meta, &created, questions.as_deref())
                    .map_err(|e| e.to_string())?;
            std::fs::write(out, doc).map_err(|e| e.to_string())
        }
        Some("inspect") => {
            let input = positional(args).pop().ok_or(USAGE)?;
            let meta = section::read_metadata(&read(&input)?).map_err(|e| e.to_string())?;
            let meta = meta.ok_or("the module has no io.kubewarden.metadata section")?;
            println!(
                "{}",
                serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?
            );
            Ok(())
        }
        #[cfg(feature = "oci")]
        Some("push") => {
            let [wasm, target] = positional(args).try_into().map_err(|_| USAGE.to_owned())?;
            let artifact = cozystack_packaging::oci::push(&read(&wasm)?, &target, insecure)
                .map_err(|e| e.to_string())?;
            println!(
                "{}",
                serde_json::to_string_pretty(&artifact).map_err(|e| e.to_string())?
            );
            Ok(())
        }
        #[cfg(feature = "oci")]
        Some("pull") => {
            let source = positional(args).pop().ok_or(USAGE)?;
            let (wasm, artifact) =
                cozystack_packaging::oci::pull(&source, insecure).map_err(|e| e.to_string())?;
            std::fs::write(need("-o")?, wasm).map_err(|e| e.to_string())?;
            println!(
                "{}",
                serde_json::to_string_pretty(&artifact).map_err(|e| e.to_string())?
            );
            Ok(())
        }
        _ => Err(USAGE.into()),
    }
}
