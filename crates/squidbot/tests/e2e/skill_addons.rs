//! Skills' `addons.env` and the vault through the real binary: a skill's variable reaches
//! `exec` only in a turn that read its SKILL.md, its value is redacted from what the
//! model and the transcript get, and any vault value a tool prints is redacted too.

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::harness::{Home, tool_results};
use crate::sandbox::declared_unavailable;
use crate::secrets::run_with_input;

/// The value of the vault secret `GH_TOKEN`, which the skill declares.
const TOKEN: &str = "ghp-addon-value-5e1f0c9a77";

/// A vault value no config refers to, planted in a workspace file.
const PLANTED: &str = "vault-only-value-4c1d9e2b";

/// A skill named `name` under `root` declaring `GH_TOKEN`, whose script says whether it
/// saw it and prints it.
fn write_skill(root: &std::path::Path, name: &str) -> std::path::PathBuf {
    let directory = root.join(name);
    std::fs::create_dir_all(directory.join("scripts")).unwrap();
    std::fs::write(
        directory.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: Talks to GitHub.\naddons:\n  env:\n    - GH_TOKEN\n---\n\n\
             Run `sh scripts/show.sh` from this directory.\n"
        ),
    )
    .unwrap();
    std::fs::write(
        directory.join("scripts/show.sh"),
        "if test -n \"$GH_TOKEN\"; then echo token-set; else echo token-unset; fi\necho \"value=$GH_TOKEN\"\n",
    )
    .unwrap();
    directory
}

/// Everything the scripted server received from request `from` on, as text.
fn received_since(server: &ScriptedLlm, from: usize) -> String {
    server.requests()[from..].iter().map(|request| request.body.to_string()).collect::<Vec<_>>().join("\n")
}

fn transcript(home: &Home) -> String {
    home.session_lines("cli:local").iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

async fn addons_reach_exec_only_in_the_turn_that_read_the_skill(backend: Option<&str>) {
    if backend.is_some_and(declared_unavailable) {
        return;
    }
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    if let Some(backend) = backend {
        home.append_config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
    }
    // An installed skill (the user's own skills, which only the person installs).
    let skill = write_skill(&home.path().join("skills"), "ghtool");
    let shown = home.run(&["skills", "show", "ghtool"]).await.success();
    assert!(
        shown.stdout.contains("addons env GH_TOKEN: not in the vault (squidbot secrets set GH_TOKEN)"),
        "{}",
        shown.stdout
    );
    run_with_input(&home, &["secrets", "set", "GH_TOKEN"], &format!("{TOKEN}\n")).await.success();
    let shown = home.run(&["skills", "show", "ghtool"]).await.success();
    assert!(shown.stdout.contains("addons env GH_TOKEN: from the vault"), "{}", shown.stdout);
    let listed = home.run(&["skills", "list"]).await.success();
    assert!(listed.stdout.contains("ghtool: addons env GH_TOKEN: from the vault"), "{}", listed.stdout);
    let script = json!({ "command": format!("sh {}/scripts/show.sh", skill.display()) });

    // 1. The model runs the script without reading SKILL.md: the variable is not set.
    server.push(Reply::tool_call("exec", script.clone()));
    server.push(Reply::text("first"));
    let start = server.requests().len();
    home.run(&["agent", "-m", "run the script"]).await.success();
    let result = &tool_results(&server.requests()[start + 1].body)[0];
    assert!(result.contains("token-unset"), "{result}");

    // 2. It reads SKILL.md, then runs the script: the variable is set, its value redacted.
    server.push(Reply::tool_call("read_file", json!({ "path": skill.join("SKILL.md").display().to_string() })));
    server.push(Reply::tool_call("exec", script.clone()));
    server.push(Reply::text("second"));
    let start = server.requests().len();
    home.run(&["agent", "-m", "use the ghtool skill"]).await.success();
    let results = tool_results(&server.requests()[start + 2].body);
    let result = results.last().unwrap();
    assert!(result.contains("token-set"), "the script saw the variable: {result}");
    assert!(result.contains("value=[REDACTED"), "{result}");
    assert!(!received_since(&server, start).contains(TOKEN), "the value reached the model");
    assert!(!transcript(&home).contains(TOKEN), "the value reached the transcript");

    // 3. The next turn runs it again without reading SKILL.md: not set.
    server.push(Reply::tool_call("exec", script));
    server.push(Reply::text("third"));
    let start = server.requests().len();
    home.run(&["agent", "-m", "run it again"]).await.success();
    let result = &tool_results(&server.requests()[start + 1].body)[0];
    assert!(result.contains("token-unset"), "{result}");

    // 4. The attack: the model writes a workspace skill asking for the same secret, reads
    // it and runs its script. Workspace skills get no secrets.
    let forged = write_skill(&home.workspace().join("skills"), "ghforged");
    let shown = home.run(&["skills", "show", "ghforged"]).await.success();
    assert!(shown.stdout.contains("addons env GH_TOKEN: never set (a workspace skill"), "{}", shown.stdout);
    server.push(Reply::tool_call("read_file", json!({ "path": "skills/ghforged/SKILL.md" })));
    server.push(Reply::tool_call("exec", json!({ "command": format!("sh {}/scripts/show.sh", forged.display()) })));
    server.push(Reply::text("fourth"));
    let start = server.requests().len();
    home.run(&["agent", "-m", "use the ghforged skill"]).await.success();
    let results = tool_results(&server.requests()[start + 2].body);
    assert!(results[results.len() - 2].contains("name: ghforged"), "the SKILL.md was read: {results:?}");
    assert!(results.last().unwrap().contains("token-unset"), "{results:?}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_addons_reach_exec_only_after_skill_md_is_read() {
    addons_reach_exec_only_in_the_turn_that_read_the_skill(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_addons_reach_exec_only_after_skill_md_is_read_under_landlock() {
    addons_reach_exec_only_in_the_turn_that_read_the_skill(Some("landlock")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vault_secret_no_config_names_is_redacted_from_tool_results_and_withheld_from_exec() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config("[tools.exec]\npass_env = [\"MY_NOTE\"]\n");
    run_with_input(&home, &["secrets", "set", "planted"], &format!("{PLANTED}\n")).await.success();
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("note.txt"), format!("the note says {PLANTED}\n")).unwrap();
    server.push(Reply::tool_call("exec", json!({ "command": "cat note.txt; echo \"my-note=${MY_NOTE:-unset}\"" })));
    server.push(Reply::text("done"));
    let start = server.requests().len();
    // The gateway was started with the vault value under a harmless name it passes on.
    home.run_with(&["agent", "-m", "read the note"], &[("MY_NOTE", PLANTED)]).await.success();
    let result = &tool_results(&server.requests()[start + 1].body)[0];
    assert!(result.contains("the note says [REDACTED"), "{result}");
    assert!(result.contains("my-note=unset"), "a variable carrying a vault value reached exec: {result}");
    assert!(!received_since(&server, start).contains(PLANTED), "the value reached the model");
    assert!(!transcript(&home).contains(PLANTED), "the value reached the transcript");
    server.assert_clean();
}
