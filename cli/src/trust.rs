//! What the signing verbs take from the command line: cosign keys (the private key's password
//! from a terminal prompt or a named environment variable, never from the command line), the
//! signature annotations, and the trust a pulled module must show before it runs.

use std::io::IsTerminal;
use std::path::Path;

use crate::error::Error;
use cozystack_packaging::keys::{self, Signer};
use cozystack_packaging::signing::{self, Trust};
use zeroize::Zeroizing;

/// `--annotation k=v`, as clap parses it.
pub fn parse_annotation(text: &str) -> Result<(String, String), Error> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE").into()),
    }
}

/// The private key's password: the environment variable `env` names, else asked on the
/// terminal (twice when `confirm`, for a new key).
pub fn password(key: &Path, env: Option<&str>, confirm: bool) -> Result<Zeroizing<String>, Error> {
    if let Some(name) = env {
        return Ok(std::env::var(name).map(Zeroizing::new).map_err(|_| {
            format!("--key-password-env {name}: the environment variable {name} is not set")
        })?);
    }
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "{}: no password: there is no terminal to ask on; name an environment variable that holds it with --key-password-env",
            key.display()
        ).into());
    }
    let ask = |prompt: &str| {
        rpassword::prompt_password(prompt)
            .map(Zeroizing::new)
            .map_err(|e| format!("reading the password: {e}"))
    };
    let first = ask(&format!("Password for {}: ", key.display()))?;
    if confirm && *ask("Again: ")? != *first {
        return Err("the passwords differ".into());
    }
    Ok(first)
}

/// The signer of the cosign private key at `path`.
pub fn signer(path: &Path, password_env: Option<&str>) -> Result<Signer, Error> {
    let pem = Zeroizing::new(std::fs::read(path).map_err(|e| Error::read(path, e))?);
    let password = password(path, password_env, false)?;
    Ok(keys::signer(
        &pem,
        password.as_bytes(),
        &path.display().to_string(),
    )?)
}

/// `--verify-key PUB` (a PEM `PUBLIC KEY`) with the annotations its signature must carry.
pub fn read(path: &Path, annotations: &[(String, String)]) -> Result<Trust, Error> {
    let pem = std::fs::read(path).map_err(|e| Error::read(path, e))?;
    let key = keys::public_key(&pem, &path.display().to_string())?;
    Ok(Trust {
        key,
        annotations: annotations.iter().cloned().collect(),
    })
}

/// What to read `reference` by: with `trust`, the digest whose signature verified (never the
/// tag again, so a tag moved in between is not read); without, the reference as given.
pub fn pinned(reference: &str, trust: Option<&Trust>, insecure: bool) -> Result<String, Error> {
    match trust {
        Some(trust) => {
            Ok(signing::verify(reference, trust, insecure)
                .map(|signature| signature.immutable_ref)?)
        }
        None => Ok(reference.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_are_key_equals_value() {
        let parsed = |text| parse_annotation(text).map_err(|e| e.to_string());
        assert_eq!(parsed("env=prod=1"), Ok(("env".into(), "prod=1".into())));
        assert_eq!(parsed("=x"), Err("\"=x\" is not KEY=VALUE".into()));
        assert_eq!(parsed("env"), Err("\"env\" is not KEY=VALUE".into()));
    }

    #[test]
    fn an_unset_password_variable_is_named() {
        let err = password(
            Path::new("k.key"),
            Some("COZYSTACK_TEST_SURELY_UNSET"),
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--key-password-env COZYSTACK_TEST_SURELY_UNSET: the environment variable COZYSTACK_TEST_SURELY_UNSET is not set"
        );
    }
}
