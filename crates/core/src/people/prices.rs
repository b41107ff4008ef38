//! What model calls cost: `[prices."provider/model"]`, per million tokens.

use std::collections::BTreeMap;

use squidbot_types::config::ModelPrice;
use squidbot_types::message::Usage;

/// The price table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    prices: BTreeMap<String, ModelPrice>,
}

/// A call's tokens split the way prices are: fresh input, output, cache reads and writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenSplit {
    /// Input tokens neither read from nor written to a cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache reads.
    pub cache_read: u64,
    /// Cache writes.
    pub cache_write: u64,
}

impl TokenSplit {
    /// The split of a provider's report (whose input count includes the cached tokens).
    pub fn of(usage: &Usage) -> TokenSplit {
        TokenSplit {
            input: usage.input_tokens.saturating_sub(usage.cached_input_tokens + usage.cache_write_tokens),
            output: usage.output_tokens,
            cache_read: usage.cached_input_tokens,
            cache_write: usage.cache_write_tokens,
        }
    }
}

impl Prices {
    /// The table of `[prices]`.
    pub fn new(prices: BTreeMap<String, ModelPrice>) -> Prices {
        Prices { prices }
    }

    /// What `tokens` of `model` (`provider/model`) cost; `None` when it has no price.
    pub fn cost(&self, model: &str, tokens: &TokenSplit) -> Option<f64> {
        let price = self.prices.get(model)?;
        let per = |count: u64, price: f64| count as f64 * price / 1_000_000.0;
        Some(
            per(tokens.input, price.input)
                + per(tokens.output, price.output)
                + per(tokens.cache_read, price.cache_read.unwrap_or(price.input))
                + per(tokens.cache_write, price.cache_write.unwrap_or(price.input)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_follow_the_table_and_unpriced_models_count_tokens_only() {
        let mut table = BTreeMap::new();
        table.insert(
            "openai/gpt".to_owned(),
            ModelPrice { input: 2.0, output: 8.0, cache_read: Some(0.5), cache_write: None },
        );
        let prices = Prices::new(table);
        let usage = Usage {
            input_tokens: 1_500_000,
            output_tokens: 1_000_000,
            cached_input_tokens: 1_000_000,
            cache_write_tokens: 0,
        };
        let split = TokenSplit::of(&usage);
        assert_eq!(split, TokenSplit { input: 500_000, output: 1_000_000, cache_read: 1_000_000, cache_write: 0 });
        assert_eq!(prices.cost("openai/gpt", &split), Some(1.0 + 8.0 + 0.5));
        assert_eq!(prices.cost("local/free", &split), None);
    }
}
