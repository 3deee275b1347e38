//! `keygen`: a cosign key pair, the private key sealed with a password.

use std::path::{Path, PathBuf};

use clap::Args;
use cozystack_packaging::keys;
use cozystack_policy::error::Error;
use cozystack_policy::trust;

use super::PasswordArgs;

#[derive(Args)]
pub struct KeygenArgs {
    /// Writes PREFIX.key and PREFIX.pub; neither may exist.
    #[arg(long, value_name = "PREFIX", default_value = "cosign")]
    pub output_prefix: PathBuf,
    #[command(flatten)]
    pub password: PasswordArgs,
}

pub fn exec(args: KeygenArgs) -> Result<(), Error> {
    let prefix = args.output_prefix.display().to_string();
    let (private, public) = (
        PathBuf::from(format!("{prefix}.key")),
        PathBuf::from(format!("{prefix}.pub")),
    );
    for path in [&private, &public] {
        if path.exists() {
            return Err(format!(
                "{} exists: remove it or choose another --output-prefix",
                path.display()
            )
            .into());
        }
    }
    let password = trust::password(&private, args.password.key_password_env.as_deref(), true)?;
    let pair = keys::generate(password.as_bytes())?;
    write_private(&private, pair.private_pem.as_bytes())?;
    std::fs::write(&public, &pair.public_pem).map_err(|e| Error::write(&public, e))?;
    eprintln!(
        "wrote {} (private, keep it secret) and {} (public, for verificationConfig)",
        private.display(),
        public.display()
    );
    Ok(())
}

/// Creates the private key file readable by its owner only.
fn write_private(path: &Path, data: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .and_then(|mut file| file.write_all(data))
        .map_err(|e| Error::write(path, e))
}
