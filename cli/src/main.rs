//! `cozystack-policy`: evaluate a request, pre-flight a cluster, and kwctl's packaging verbs,
//! for the Cozystack capabilities policy.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod commands;

#[derive(Parser)]
#[command(
    name = "cozystack-policy",
    version,
    about = "The Cozystack capabilities policy, run the way Kubewarden runs it",
    long_about = "The Cozystack capabilities policy, run the way Kubewarden runs it: evaluate one \
request (run), judge a change set as Flux applies it (check), pre-flight a whole cluster \
(preflight), play random lifecycles against the rules' guarantees (simulate), all on a cluster \
read from a dump or live through the current kubeconfig context; package the module (annotate, \
inspect, push, pull, artifacthub) and sign it (keygen, sign, verify, sbom, \
verification-config).\n\nWithout --settings, every verb judges with the stock deployment that \
deploy/ runs (the built-in rule set, for any supported Cozystack release), and each report says \
which settings judged it."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate one AdmissionRequest or AdmissionReview and print the verdict, the message and
    /// the host calls the policy made. Exit 0 allowed, 1 denied, 2 when it cannot be evaluated.
    Run(commands::run::RunArgs),
    /// Judge a change set against the cluster as Flux applies it (sorted into stages, each
    /// dry-run whole before any of it is applied, then the prunes), or in order (--in-order).
    /// Exit 0 every write admitted, 1 one refused or a Kustomization that never lands (a
    /// dependency missing, never Ready, or in a cycle), 2 when the input, the settings or the
    /// cluster cannot be used.
    Check(commands::check::CheckArgs),
    /// Replay every Namespace and HelmRelease as the audit scanner would and report what the
    /// policy flags. Exit 0 clean, 1 findings, 2 when the cluster or settings cannot be used.
    Preflight(commands::preflight::PreflightArgs),
    /// Play random lifecycles of the install (Tenants, switches, apps created and deleted by
    /// their administrators through cozystack-api, and what cozystack-api and helm-controller
    /// write after them) through the module, checking the rules' guarantees after every step.
    /// Exit 0 none broken, 1 one broken (the shrunk counterexample written as an e2e scenario),
    /// 2 when it cannot run.
    Simulate(commands::simulate::SimulateArgs),
    /// Embed policy-metadata.yml in the module (the io.kubewarden.metadata section), as kwctl
    /// annotate does.
    Annotate(commands::annotate::AnnotateArgs),
    /// Print the metadata embedded in a module.
    Inspect(commands::inspect::InspectArgs),
    /// Write the Artifact Hub package (artifacthub-pkg.yml) from the metadata.
    Artifacthub(commands::artifacthub::ArtifacthubArgs),
    /// Push an annotated module to an OCI registry as a Kubewarden policy artifact.
    Push(commands::push::PushArgs),
    /// Pull a policy artifact, check its digest and media types, and write the module.
    Pull(commands::pull::PullArgs),
    /// Write a cosign key pair (ECDSA P-256, cosign's default): PREFIX.key sealed with a
    /// password, and PREFIX.pub.
    Keygen(commands::keygen::KeygenArgs),
    /// Sign a pushed artifact, and the SBOM attached to it, with a cosign private key, as
    /// `cosign sign --key` does.
    Sign(commands::sign::SignArgs),
    /// Check an artifact's cosign signature against a public key, as `kwctl verify -k` does.
    /// Exit 0 verified, 1 refused, 2 when it cannot be checked.
    Verify(commands::verify::VerifyArgs),
    /// Print the CycloneDX SBOM attached to an artifact.
    Sbom(commands::sbom::SbomArgs),
    /// Print a Kubewarden verification config requiring signatures by these keys (for a
    /// PolicyServer's `verificationConfig` ConfigMap, or `verify --verification-config`).
    VerificationConfig(commands::verification_config::VerificationConfigArgs),
}

/// Exit 2: what the verb was given cannot be used (clap's code for a bad command line too).
const UNUSABLE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The verb's deadline for its cluster reads counts from here.
    commands::started();
    let result = match cli.command {
        Command::Run(args) => commands::run::exec(args),
        Command::Check(args) => commands::check::exec(args),
        Command::Preflight(args) => commands::preflight::exec(args),
        Command::Simulate(args) => commands::simulate::exec(args),
        Command::Annotate(args) => commands::annotate::exec(args).map(|()| ExitCode::SUCCESS),
        Command::Inspect(args) => commands::inspect::exec(args).map(|()| ExitCode::SUCCESS),
        Command::Artifacthub(args) => commands::artifacthub::exec(args).map(|()| ExitCode::SUCCESS),
        Command::Push(args) => commands::push::exec(args).map(|()| ExitCode::SUCCESS),
        Command::Pull(args) => commands::pull::exec(args).map(|()| ExitCode::SUCCESS),
        Command::Keygen(args) => commands::keygen::exec(args).map(|()| ExitCode::SUCCESS),
        Command::Sign(args) => commands::sign::exec(args).map(|()| ExitCode::SUCCESS),
        Command::Verify(args) => commands::verify::exec(args),
        Command::Sbom(args) => commands::sbom::exec(args).map(|()| ExitCode::SUCCESS),
        Command::VerificationConfig(args) => {
            commands::verification_config::exec(args).map(|()| ExitCode::SUCCESS)
        }
    };
    result.unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::from(UNUSABLE)
    })
}
