//! Skill discovery over 500 skills: the cached path (nothing changed since the last
//! call, what every turn pays) and a cold discovery (a new catalog parsing every file).
//! Run: `cargo bench -p squidbot-skills --bench discovery`.

#![allow(clippy::expect_used, reason = "a benchmark aborts loudly on any setup failure")]

use std::path::Path;
use std::time::{Duration, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use squidbot_skills::{SkillCatalog, SkillRoots};

const SKILLS: usize = 500;

/// Moves an mtime an hour back, out of the catalog's racy window, as for files that
/// were not just written.
fn age(path: &Path) {
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::open(path).and_then(|file| file.set_modified(hour_ago)).expect("set mtime");
}

fn populate(root: &Path) {
    for index in 0..SKILLS {
        let name = format!("skill-{index:03}");
        let directory = root.join(&name);
        std::fs::create_dir_all(directory.join("scripts")).expect("create skill dir");
        let requires = match index % 4 {
            0 => "requires:\n  bins: [git]\n",
            1 => "requires:\n  bins: [no-such-binary-here]\n  env: [NO_SUCH_VARIABLE]\n",
            2 => "metadata: {\"openclaw\": {\"requires\": {\"anyBins\": [\"rg\", \"grep\"]}}}\n",
            _ => "",
        };
        let body = "Step by step instructions for the task.\n".repeat(40);
        let file = directory.join("SKILL.md");
        std::fs::write(
            &file,
            format!("---\nname: {name}\ndescription: Does task number {index} when the user asks for it.\n{requires}---\n\n# {name}\n\n{body}"),
        )
        .expect("write SKILL.md");
        age(&file);
    }
    age(root);
}

fn discovery(criterion: &mut Criterion) {
    let directory = tempfile::tempdir().expect("temp dir");
    let root = directory.path().join("skills");
    populate(&root);
    let roots = SkillRoots { workspace: Some(root), ..SkillRoots::default() };

    let catalog = SkillCatalog::new(roots.clone());
    assert_eq!(catalog.discover().skills.len(), SKILLS);
    criterion.bench_function("discover 500 skills, nothing changed", |bench| {
        bench.iter(|| std::hint::black_box(catalog.discover()));
    });
    criterion.bench_function("discover 500 skills, cold cache", |bench| {
        bench.iter(|| std::hint::black_box(SkillCatalog::new(roots.clone()).discover()));
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = discovery
}
criterion_main!(benches);
