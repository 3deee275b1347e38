//! Signing keys in cosign's formats, through the `sigstore` crate: the private key as `cosign
//! generate-key-pair` writes it (PKCS#8 sealed with scrypt and secretbox, PEM `ENCRYPTED
//! SIGSTORE PRIVATE KEY`; cosign's older `ENCRYPTED COSIGN PRIVATE KEY` reads too) and the
//! public key as a PEM `PUBLIC KEY`, the form Kubewarden's `verificationConfig` embeds.

/// A private key ready to sign (what `cosign sign --key` holds).
pub use sigstore::crypto::SigStoreSigner as Signer;
use sigstore::crypto::signing_key::ecdsa::ECDSAKeys;
use sigstore::crypto::signing_key::{
    COSIGN_PRIVATE_KEY_PEM_LABEL, SIGSTORE_PRIVATE_KEY_PEM_LABEL, SigStoreKeyPair,
};
use sigstore::crypto::{CosignVerificationKey, SigningScheme};
use thiserror::Error;
use zeroize::Zeroizing;

#[derive(Debug, Error)]
pub enum KeyError {
    #[error("{path}: not a PEM file ({reason})")]
    NotPem { path: String, reason: String },
    #[error(
        "{path}: holds several PEM blocks ({labels}); a key file holds one key: keep the one you mean in a file of its own"
    )]
    Several { path: String, labels: String },
    #[error(
        "{path}: a PEM {label}, not a cosign private key (ENCRYPTED SIGSTORE PRIVATE KEY): write one with `cozystack-policy keygen` or `cosign generate-key-pair`"
    )]
    NotPrivate { path: String, label: String },
    #[error("{path}: cannot decrypt the private key: wrong password")]
    Password { path: String },
    #[error("{path}: {key} keys are not supported: use ECDSA (cosign's default) or Ed25519")]
    Unsupported { path: String, key: String },
    #[error(
        "{path}: a PEM {label}, not a public key (PUBLIC KEY): pass the .pub file `keygen` wrote"
    )]
    NotPublic { path: String, label: String },
    #[error("{path}: not a usable public key: {reason}")]
    BadPublic { path: String, reason: String },
    #[error("generating the key pair: {0}")]
    Generate(String),
}

/// A pair as `keygen` writes it: `<prefix>.key` (encrypted) and `<prefix>.pub`.
pub struct GeneratedPair {
    pub private_pem: Zeroizing<String>,
    pub public_pem: String,
}

/// A new ECDSA P-256 pair, cosign's default, the private half sealed with `password` (which
/// may be empty, as cosign allows).
pub fn generate(password: &[u8]) -> Result<GeneratedPair, KeyError> {
    let fail = |e: sigstore::errors::SigstoreError| KeyError::Generate(e.to_string());
    let pair = SigningScheme::ECDSA_P256_SHA256_ASN1
        .create_signer()
        .and_then(|signer| signer.to_sigstore_keypair())
        .map_err(fail)?;
    // The crate's PEM lines end in CRLF; cosign writes LF.
    let private = pair.private_key_to_encrypted_pem(password).map_err(fail)?;
    Ok(GeneratedPair {
        private_pem: Zeroizing::new(private.replace("\r\n", "\n")),
        public_pem: pair
            .public_key_to_pem()
            .map_err(fail)?
            .replace("\r\n", "\n"),
    })
}

/// The PEM label of `pem`, or why it is not one PEM block. A file of several blocks (a public
/// key pasted after another) is refused rather than read for its first: which key verifies
/// must not depend on the order of a file.
fn label(pem: &[u8], path: &str) -> Result<String, KeyError> {
    let not_pem = |reason: String| KeyError::NotPem {
        path: path.to_owned(),
        reason,
    };
    let blocks = pem::parse_many(pem).map_err(|e| not_pem(e.to_string()))?;
    match blocks.as_slice() {
        [] => Err(not_pem("no PEM block".into())),
        [one] => Ok(one.tag().to_owned()),
        many => Err(KeyError::Several {
            path: path.to_owned(),
            labels: many.iter().map(|b| b.tag()).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// The signer of a cosign private key; `path` names the file in errors.
pub fn signer(pem: &[u8], password: &[u8], path: &str) -> Result<Signer, KeyError> {
    let label = label(pem, path)?;
    if label != SIGSTORE_PRIVATE_KEY_PEM_LABEL && label != COSIGN_PRIVATE_KEY_PEM_LABEL {
        return Err(KeyError::NotPrivate {
            path: path.to_owned(),
            label,
        });
    }
    // The label is right, so a failure to open the box is the password (secretbox
    // authenticates what it opens: a wrong password cannot yield a wrong key).
    let pair =
        SigStoreKeyPair::from_encrypted_pem(pem, password).map_err(|_| KeyError::Password {
            path: path.to_owned(),
        })?;
    let scheme = match &pair {
        SigStoreKeyPair::ECDSA(ECDSAKeys::P256(_)) => SigningScheme::ECDSA_P256_SHA256_ASN1,
        SigStoreKeyPair::ECDSA(ECDSAKeys::P384(_)) => SigningScheme::ECDSA_P384_SHA384_ASN1,
        SigStoreKeyPair::ECDSA(ECDSAKeys::P521(_)) => SigningScheme::ECDSA_P521_SHA512_ASN1,
        SigStoreKeyPair::ED25519(_) => SigningScheme::ED25519,
        SigStoreKeyPair::RSA(_) => {
            return Err(KeyError::Unsupported {
                path: path.to_owned(),
                key: "RSA".to_owned(),
            });
        }
    };
    pair.to_sigstore_signer(&scheme)
        .map_err(|e| KeyError::Unsupported {
            path: path.to_owned(),
            key: e.to_string(),
        })
}

/// A public key read from a PEM file: the key, and its text for messages and configs.
pub struct PublicKey {
    pub key: CosignVerificationKey,
    pub pem: String,
    /// The file it came from, for messages.
    pub path: String,
}

/// Reads a PEM `PUBLIC KEY` (ECDSA, Ed25519 or RSA, as cosign verifies).
pub fn public_key(pem: &[u8], path: &str) -> Result<PublicKey, KeyError> {
    let label = label(pem, path)?;
    if label != "PUBLIC KEY" {
        return Err(KeyError::NotPublic {
            path: path.to_owned(),
            label,
        });
    }
    let key = CosignVerificationKey::try_from_pem(pem).map_err(|e| KeyError::BadPublic {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    Ok(PublicKey {
        key,
        pem: String::from_utf8_lossy(pem).into_owned(),
        path: path.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_pair_signs_and_verifies_and_keeps_its_password() {
        let pair = generate(b"s3cret").unwrap();
        assert!(
            pair.private_pem
                .starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")
        );
        assert!(pair.public_pem.starts_with("-----BEGIN PUBLIC KEY-----\n"));
        assert!(!pair.private_pem.contains('\r'));
        let signer = signer(pair.private_pem.as_bytes(), b"s3cret", "k.key").unwrap();
        let public = public_key(pair.public_pem.as_bytes(), "k.pub").unwrap();
        let signature = signer.sign(b"payload").unwrap();
        public
            .key
            .verify_signature(sigstore::crypto::Signature::Raw(&signature), b"payload")
            .unwrap();
        let err = signer_err(pair.private_pem.as_bytes(), b"wrong");
        assert_eq!(err, "k.key: cannot decrypt the private key: wrong password");
    }

    fn signer_err(pem: &[u8], password: &[u8]) -> String {
        match signer(pem, password, "k.key") {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn the_wrong_kind_of_file_says_which_it_is() {
        let pair = generate(b"").unwrap();
        assert_eq!(
            signer_err(pair.public_pem.as_bytes(), b""),
            "k.key: a PEM PUBLIC KEY, not a cosign private key (ENCRYPTED SIGSTORE PRIVATE KEY): write one with `cozystack-policy keygen` or `cosign generate-key-pair`"
        );
        assert!(signer_err(b"not a key", b"").starts_with("k.key: not a PEM file ("));
        // Two keys in one file: neither is taken for the other.
        let other = generate(b"").unwrap();
        let both = format!("{}{}", pair.public_pem, other.public_pem);
        assert_eq!(
            public_key(both.as_bytes(), "k.pub")
                .err()
                .unwrap()
                .to_string(),
            "k.pub: holds several PEM blocks (PUBLIC KEY, PUBLIC KEY); a key file holds one key: keep the one you mean in a file of its own"
        );
        let err = public_key(pair.private_pem.as_bytes(), "k.pub")
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "k.pub: a PEM ENCRYPTED SIGSTORE PRIVATE KEY, not a public key (PUBLIC KEY): pass the .pub file `keygen` wrote"
        );
    }
}
