//! What source-controller packs of a repository into the artifact Flux builds from: a folder of
//! the change set is read as that artifact holds it, not as it lies on disk.
//!
//! source-controller v1.8.0 (`internal/controller/gitrepository_controller.go` lines 859-873)
//! loads every `.sourceignore` of the checkout, each scoped to its folder, and archives through
//! fluxcd/pkg artifact v0.8.0 (`storage/archive.go`): `SourceIgnoreFilter` excludes the VCS
//! files always, and the default patterns (images and archives, CI files, `.sops.yaml` and the
//! like) only when the repository states no pattern of its own; `Archive` leaves out whatever is
//! neither a regular file nor a folder (symlinks). The patterns are gitignore's, and the last one
//! that matches a path decides (fluxcd/pkg sourceignore v0.17.0).

use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use serde_json::Value;

use crate::error::Error;

/// The file a folder states its patterns in (`sourceignore.IgnoreFile`).
pub const IGNORE_FILE: &str = ".sourceignore";

/// `sourceignore.ExcludeVCS`: always excluded.
const EXCLUDE_VCS: &str = ".git/,.gitignore,.gitmodules,.gitattributes";

/// `ExcludeExt`, `ExcludeCI` and `ExcludeExtra`: excluded unless the repository has patterns.
const EXCLUDE_DEFAULT: [&str; 3] = [
    "*.jpg,*.jpeg,*.gif,*.png,*.wmv,*.flv,*.tar.gz,*.zip",
    ".github/,.circleci/,.travis.yml,.gitlab-ci.yml,appveyor.yml,.drone.yml,cloudbuild.yaml,codeship-services.yml,codeship-steps.yml",
    "**/.goreleaser.yml,**/.sops.yaml,**/.flux.yaml",
];

/// The GitRepository a Kustomization's source is: its `spec.ignore`, patterns read after every
/// `.sourceignore`, at the checkout's root.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GitRepository {
    /// Where it was read, and the patterns.
    ignore: Option<(String, String)>,
    /// `namespace/name`, as a Kustomization's `sourceRef` names it (when it was read).
    pub name: Option<String>,
}

impl GitRepository {
    /// The `source.toolkit.fluxcd.io` GitRepository `object` (read from `origin`).
    pub fn of(object: &Value, origin: &str) -> Result<GitRepository, Error> {
        let source = object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("source.toolkit.fluxcd.io/"));
        if !source || object["kind"] != "GitRepository" {
            return Err(format!(
                "{origin}: not a Flux GitRepository (source.toolkit.fluxcd.io, kind GitRepository)"
            )
            .into());
        }
        let meta = &object["metadata"];
        Ok(GitRepository {
            ignore: object["spec"]["ignore"]
                .as_str()
                .map(|text| (format!("{origin} spec.ignore"), text.to_owned())),
            name: Some(format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().unwrap_or_default()
            )),
        })
    }
}

/// A repository's checkout and the patterns its artifact is packed by.
#[derive(Debug)]
pub struct Packed {
    root: PathBuf,
    /// Pattern sets in the order source-controller lists them: the built-in ones, then each
    /// `.sourceignore` from the root down. A later set's match overrides an earlier one's.
    layers: Vec<Gitignore>,
}

impl Packed {
    /// The repository `path` lies in: the nearest folder above it (or itself) holding `.git`,
    /// else `path` itself, a checkout of its own.
    pub fn of(path: &Path, repository: &GitRepository) -> Result<Packed, Error> {
        let start = std::fs::canonicalize(path).map_err(|e| Error::read(path, e))?;
        let start = match start.is_dir() {
            true => start,
            false => start.parent().map_or(start.clone(), Path::to_owned),
        };
        let root = start
            .ancestors()
            .find(|dir| dir.join(".git").exists())
            .unwrap_or(&start)
            .to_owned();
        let files = match tracked_ignore_files(&root) {
            Some(files) => files,
            None => {
                let mut files = Vec::new();
                ignore_files(&root, &mut files)?;
                files
            }
        };
        let mut own = Vec::new();
        let mut stated = false;
        for file in files {
            let dir = file.parent().unwrap_or(&root);
            let text = std::fs::read_to_string(&file).map_err(|e| Error::read(&file, e))?;
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .collect();
            stated |= !lines.is_empty();
            own.push(layer(dir, &file, &lines)?);
        }
        // `spec.ignore`, read last, at the root (`ReadPatterns(strings.NewReader(*obj.Spec.Ignore))`).
        if let Some((origin, text)) = &repository.ignore {
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .collect();
            stated |= !lines.is_empty();
            own.push(layer(&root, Path::new(origin), &lines)?);
        }
        let mut builtin: Vec<&str> = EXCLUDE_VCS.split(',').collect();
        if !stated {
            builtin.extend(EXCLUDE_DEFAULT.iter().flat_map(|set| set.split(',')));
        }
        let mut layers = vec![layer(&root, &root.join(IGNORE_FILE), &builtin)?];
        layers.extend(own);
        Ok(Packed { root, layers })
    }

    /// The checkout's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every file the artifact holds, relative to the root, in name order: in a git work tree
    /// what the repository holds or is about to (tracked, or new and not ignored by git), else
    /// every file under the root; either way only what [`Packed::keeps`].
    pub fn files(&self) -> Result<Vec<PathBuf>, Error> {
        let mut files = match git_files(&self.root, &[]) {
            Some(files) => files,
            None => {
                let mut files = Vec::new();
                walk(&self.root, &mut files)?;
                files
            }
        };
        files.retain(|file| {
            file.ancestors()
                .take_while(|p| *p != self.root)
                .all(|p| self.keeps(p))
        });
        files.sort();
        Ok(files
            .into_iter()
            .filter_map(|f| f.strip_prefix(&self.root).ok().map(Path::to_owned))
            .collect())
    }

    /// Whether the artifact holds `path` (under the root, canonical): a regular file or a
    /// folder that no pattern excludes, or that a later pattern takes back.
    pub fn keeps(&self, path: &Path) -> bool {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return false;
        };
        if !(meta.is_file() || meta.is_dir()) {
            return false;
        }
        for layer in self.layers.iter().rev() {
            if !path.starts_with(layer.path()) || path == layer.path() {
                continue;
            }
            match layer.matched_path_or_any_parents(path, meta.is_dir()) {
                Match::Ignore(_) => return false,
                Match::Whitelist(_) => return true,
                Match::None => {}
            }
        }
        true
    }
}

/// One pattern set, scoped to `dir`; `file` names it in errors.
fn layer(dir: &Path, file: &Path, lines: &[&str]) -> Result<Gitignore, Error> {
    let mut builder = GitignoreBuilder::new(dir);
    for line in lines {
        builder
            .add_line(Some(file.to_owned()), line)
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(builder
        .build()
        .map_err(|e| format!("{}: {e}", file.display()))?)
}

/// The `.sourceignore` files the git repository at `root` holds or is about to (tracked, or new
/// and not ignored by git: a build's output or a scratch folder is never pushed), root first;
/// `None` when `root` is no git work tree or git cannot say.
fn tracked_ignore_files(root: &Path) -> Option<Vec<PathBuf>> {
    let mut files = git_files(root, &[":(glob)**/.sourceignore"])?;
    // The folder's own before its subfolders', as the walk below lists them.
    files.sort_by(|a, b| a.parent().cmp(&b.parent()));
    Some(files)
}

/// The files of the git work tree at `root` matching `pathspecs` (all without any) that the
/// repository holds or is about to, as paths under `root`; `None` when `root` is no git work
/// tree or git cannot say.
fn git_files(root: &Path, pathspecs: &[&str]) -> Option<Vec<PathBuf>> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
    };
    // `root` must be the work tree's top, not a folder inside another repository whose `.git`
    // git found further up (a `.git` folder it cannot read as one).
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let top = PathBuf::from(String::from_utf8_lossy(&top.stdout).trim());
    if std::fs::canonicalize(&top).ok()? != root {
        return None;
    }
    let mut ls = vec![
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
        "--",
    ];
    ls.extend(pathspecs);
    let output = git(&ls)?;
    Some(
        output
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
            .filter(|p| p.is_file())
            .collect(),
    )
}

/// Every file under `dir`, never inside `.git`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::read(dir, e))? {
        let path = entry.map_err(|e| Error::read(dir, e))?.path();
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::read(&path, e))?;
        if meta.is_dir() && path.file_name().is_some_and(|n| n != ".git") {
            walk(&path, out)?;
        } else if meta.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The entries of `dir`, in name order, as every walk of a source reads them.
pub fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::read(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    Ok(entries)
}

/// Every `.sourceignore` under `dir`, the folder's own before its subfolders' (in name order),
/// never inside `.git` (`sourceignore.LoadIgnorePatterns`).
fn ignore_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let own = dir.join(IGNORE_FILE);
    if own.is_file() {
        out.push(own);
    }
    for entry in sorted_entries(dir)? {
        let is_dir = std::fs::symlink_metadata(&entry).is_ok_and(|m| m.is_dir());
        if is_dir && entry.file_name().is_some_and(|n| n != ".git") {
            ignore_files(&entry, out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "cozystack-sourceignore-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap_or(&dir)).unwrap();
            std::fs::write(&path, text).unwrap();
        }
        std::fs::canonicalize(&dir).unwrap()
    }

    /// The paths under the root the artifact keeps, as `Archive` walks them.
    fn kept(packed: &Packed) -> Vec<String> {
        fn walk(packed: &Packed, dir: &Path, out: &mut Vec<String>) {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for entry in entries {
                if entry.is_dir() && !entry.is_symlink() {
                    walk(packed, &entry, out);
                } else if packed.keeps(&entry) {
                    let relative = entry.strip_prefix(packed.root()).unwrap();
                    out.push(relative.display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(packed, packed.root(), &mut out);
        out
    }

    const FILES: [(&str, &str); 9] = [
        (".git/config", ""),
        (".gitignore", ""),
        (".github/workflows/ci.yaml", ""),
        ("cloudbuild.yaml", ""),
        ("apps/.sops.yaml", ""),
        ("apps/logo.png", ""),
        ("apps/postgres.yaml", ""),
        ("apps/drafts/redis.yaml", ""),
        ("apps/drafts/keep.yaml", ""),
    ];

    #[test]
    fn without_patterns_of_its_own_the_defaults_leave_out_vcs_ci_images_and_sops() {
        let root = repo("defaults", &FILES);
        let packed = Packed::of(&root.join("apps"), &GitRepository::default()).unwrap();
        // The checkout is the folder holding .git, above the path given.
        assert_eq!(packed.root(), root);
        assert_eq!(
            kept(&packed),
            [
                "apps/drafts/keep.yaml",
                "apps/drafts/redis.yaml",
                "apps/postgres.yaml"
            ]
        );
    }

    #[test]
    fn a_sourceignore_replaces_the_defaults_but_never_the_vcs_patterns() {
        // SourceIgnoreFilter: any pattern of the repository's own, and only ExcludeVCS stays
        // beside it, so CI files and .sops.yaml are packed again.
        let mut files = FILES.to_vec();
        files.push((
            "apps/.sourceignore",
            "# drafts stay out\ndrafts/\n!drafts/keep.yaml\n",
        ));
        let root = repo("own", &files);
        let packed = Packed::of(&root, &GitRepository::default()).unwrap();
        assert_eq!(
            kept(&packed),
            [
                ".github/workflows/ci.yaml",
                "apps/.sops.yaml",
                "apps/.sourceignore",
                "apps/drafts/keep.yaml",
                "apps/logo.png",
                "apps/postgres.yaml",
                "cloudbuild.yaml",
            ]
        );
    }

    #[test]
    fn a_git_repository_s_spec_ignore_is_read_last_at_the_root() {
        // gitrepository_controller.go: spec.ignore's patterns after every .sourceignore; any
        // pattern at all, so the defaults give way as they do to a .sourceignore.
        let root = repo("spec-ignore", &FILES);
        let object: Value = serde_yaml::from_str(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: platform, namespace: cozy-fluxcd}\nspec:\n  ignore: |\n    # drafts stay out\n    /apps/drafts/\n",
        )
        .unwrap();
        let repository = GitRepository::of(&object, "git.yaml").unwrap();
        let packed = Packed::of(&root, &repository).unwrap();
        assert_eq!(
            kept(&packed),
            [
                ".github/workflows/ci.yaml",
                "apps/.sops.yaml",
                "apps/logo.png",
                "apps/postgres.yaml",
                "cloudbuild.yaml",
            ]
        );
        let not_a_source = serde_yaml::from_str("apiVersion: v1\nkind: ConfigMap\n").unwrap();
        assert!(
            GitRepository::of(&not_a_source, "x.yaml")
                .unwrap_err()
                .to_string()
                .contains("not a Flux GitRepository")
        );
    }

    #[test]
    fn a_pattern_is_scoped_to_the_folder_of_its_file() {
        let root = repo(
            "scoped",
            &[
                (".git/HEAD", ""),
                ("a/.sourceignore", "/x.yaml\n"),
                ("a/x.yaml", ""),
                ("a/b/x.yaml", ""),
                ("x.yaml", ""),
            ],
        );
        let packed = Packed::of(&root, &GitRepository::default()).unwrap();
        assert_eq!(kept(&packed), ["a/.sourceignore", "a/b/x.yaml", "x.yaml"]);
    }

    #[test]
    fn in_a_git_work_tree_a_folder_git_ignores_states_no_pattern() {
        // What is pushed is what source-controller checks out: a folder git ignores (a build's
        // output, a scratch copy) never reaches it, nor do its patterns.
        let root = repo(
            "git",
            &[
                (".gitignore", "scratch/\n"),
                ("apps/postgres.yaml", ""),
                ("cloudbuild.yaml", ""),
                ("scratch/.sourceignore", "*.yaml\n"),
            ],
        );
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(&root)
                .args(args)
                .output()
                .unwrap_or_else(|e| panic!("git: {e}"));
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q"]);
        let packed = Packed::of(&root.join("apps"), &GitRepository::default()).unwrap();
        // No pattern of its own: the defaults apply, and cloudbuild.yaml stays out.
        assert_eq!(
            kept(&packed),
            ["apps/postgres.yaml", "scratch/.sourceignore"]
        );
        // A new pattern file, not yet committed, counts: the defaults give way.
        std::fs::write(
            root.join("apps/.sourceignore"),
            "# none of the defaults\n/nothing\n",
        )
        .unwrap();
        let packed = Packed::of(&root.join("apps"), &GitRepository::default()).unwrap();
        assert_eq!(
            kept(&packed),
            [
                "apps/.sourceignore",
                "apps/postgres.yaml",
                "cloudbuild.yaml",
                "scratch/.sourceignore"
            ]
        );
    }

    #[test]
    fn a_symlink_is_not_packed() {
        let root = repo("links", &[(".git/HEAD", ""), ("real.yaml", "")]);
        std::os::unix::fs::symlink(root.join("real.yaml"), root.join("link.yaml")).unwrap();
        let packed = Packed::of(&root, &GitRepository::default()).unwrap();
        assert!(packed.keeps(&root.join("real.yaml")));
        assert!(!packed.keeps(&root.join("link.yaml")));
    }
}
