//! What the leak scan costs the streaming relay when the vault holds 100 values: two
//! gateways on one provider, one whose vault is empty and one holding 100 random values
//! of 24 to 40 characters (every vault value is a needle of the scanner on every
//! streamed delta), measured in alternating rounds so both see the same machine.

use std::io::Write as _;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::processes::{Home, Running, gateway_binary, wait_healthy};
use crate::relay;

/// Values stored in the second gateway's vault.
pub const VAULT_VALUES: usize = 100;

/// Stores `count` random values in `home`'s vault with `squidbot secrets set`.
fn fill_vault(home: &Home, count: usize) -> Result<()> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    for index in 0..count {
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let length = 24 + (next() % 17) as usize;
        let value: String = (0..length).map(|_| char::from(alphabet[(next() % 64) as usize])).collect();
        let mut child = Command::new(gateway_binary())
            .args(["secrets", "set", &format!("bench.value{index}")])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("SQUIDBOT_HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("can't run squidbot secrets set")?;
        child.stdin.take().context("no stdin")?.write_all(format!("{value}\n").as_bytes())?;
        if !child.wait()?.success() {
            bail!("squidbot secrets set failed for value {index}");
        }
    }
    Ok(())
}

async fn gateway(provider: &Running, vault_values: usize) -> Result<(Home, Running)> {
    let home = Home::new(&provider.base)?;
    fill_vault(&home, vault_values)?;
    let (gateway, _) = home.start_gateway()?;
    wait_healthy(gateway.address()?, std::time::Duration::from_secs(10))?;
    Ok((home, gateway))
}

/// Runs `rounds` alternating rounds of `requests` replies through each gateway; prints
/// each round's SSE p50 and p99 per token and the ratio of the medians.
pub async fn measure(provider: &Running, rounds: usize, requests: usize) -> Result<()> {
    let (_plain_home, plain) = gateway(provider, 0).await?;
    let (_vault_home, with_values) = gateway(provider, VAULT_VALUES).await?;
    let mut plain_p50 = Vec::new();
    let mut vault_p50 = Vec::new();
    for round in 0..rounds {
        let a = relay::measure(&provider.base, &plain.base, requests).await?;
        let b = relay::measure(&provider.base, &with_values.base, requests).await?;
        println!(
            "round {round}: empty vault SSE p50 {:.3} p99 {:.3} ms | {VAULT_VALUES} vault values p50 {:.3} p99 {:.3} ms",
            a.sse.percentile(0.5),
            a.sse.percentile(0.99),
            b.sse.percentile(0.5),
            b.sse.percentile(0.99)
        );
        plain_p50.push(a.sse.percentile(0.5));
        vault_p50.push(b.sse.percentile(0.5));
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (plain, with_values) = (median(&mut plain_p50), median(&mut vault_p50));
    println!(
        "relay per token, median of round p50s: empty vault {plain:.3} ms, {VAULT_VALUES} vault values \
         {with_values:.3} ms; ratio {:.3} (target < 1.05)",
        with_values / plain
    );
    Ok(())
}
