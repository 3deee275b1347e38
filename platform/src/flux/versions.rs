//! The Flux each supported Cozystack release ships, as data: where Flux's behaviour differs by
//! version, the model reads it from a row here, so a later Flux (kustomize-controller v1.9's
//! strict substitution by default and `substituteStrategy`, say) is one row and one arm, not a
//! rewrite. Read from `internal/fluxinstall/manifests/fluxcd.yaml` at each release's tag
//! (v1.5.0 to v1.6.2) and at main (3c780acd): every one pins the same controllers, so only that
//! row is built.

use cozystack_resolver::release::{Judged, Release};

/// One Flux, by the controllers it runs and what differs between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flux {
    pub source_controller: &'static str,
    pub kustomize_controller: &'static str,
    pub helm_controller: &'static str,
    /// What post-build substitution does with a variable no source sets.
    pub substitution: Substitution,
}

/// How kustomize-controller's post-build substitution treats an unset variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Substitution {
    /// fluxcd/pkg envsubst, not strict: it is empty (kustomize-controller up to v1.8).
    Lenient,
}

/// Why the model cannot tell which Flux plays a change set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UnknownFlux {
    #[error(
        "this tool has no row for the Flux Cozystack {0} ships: use a release of the tool that supports it"
    )]
    NoRow(Release),
    #[error(
        "the supported Cozystack releases ship different Flux versions: set cozystackRelease in the settings to the cluster's"
    )]
    Differs,
}

/// Flux v2.8: what Cozystack v1.5.0 to v1.6.2 and main ship.
pub const FLUX_2_8: Flux = Flux {
    source_controller: "v1.8.0",
    kustomize_controller: "v1.8.0",
    helm_controller: "v1.5.0",
    substitution: Substitution::Lenient,
};

/// Each supported release's Flux, by the release's name.
const SHIPPED: &[(&str, Flux)] = &[
    ("v1.5.0", FLUX_2_8),
    ("v1.5.1", FLUX_2_8),
    ("v1.5.2", FLUX_2_8),
    ("v1.5.3", FLUX_2_8),
    ("v1.5.4", FLUX_2_8),
    ("v1.6.0", FLUX_2_8),
    ("v1.6.1", FLUX_2_8),
    ("v1.6.2", FLUX_2_8),
    ("main", FLUX_2_8),
];

impl Flux {
    /// The Flux `release` ships; `None` for a release no row was read for.
    pub fn of(release: Release) -> Option<Flux> {
        SHIPPED
            .iter()
            .find(|(name, _)| *name == release.name())
            .map(|(_, flux)| *flux)
    }

    /// The Flux the release the settings name ships; with none named, the one every supported
    /// release ships. An error says why the model cannot tell: a release without a row, or
    /// releases that ship different ones (name the cluster's `cozystackRelease` then).
    pub fn judged(judged: Judged) -> Result<Flux, UnknownFlux> {
        let releases: Vec<Release> = match judged.0 {
            Some(release) => vec![release],
            None => Release::all().collect(),
        };
        let mut shipped = Vec::new();
        for release in releases {
            let flux = Flux::of(release).ok_or(UnknownFlux::NoRow(release))?;
            if !shipped.contains(&flux) {
                shipped.push(flux);
            }
        }
        match shipped.as_slice() {
            [flux] => Ok(*flux),
            _ => Err(UnknownFlux::Differs),
        }
    }

    /// The controllers, as a report names them.
    pub fn describe(&self) -> String {
        format!(
            "source-controller {}, kustomize-controller {}, helm-controller {}",
            self.source_controller, self.kustomize_controller, self.helm_controller
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_release_has_the_flux_it_ships() {
        for release in Release::all() {
            assert_eq!(Flux::of(release), Some(FLUX_2_8), "{release}");
        }
        assert_eq!(Flux::judged(Judged(None)), Ok(FLUX_2_8));
        assert_eq!(
            FLUX_2_8.describe(),
            "source-controller v1.8.0, kustomize-controller v1.8.0, helm-controller v1.5.0"
        );
    }
}
