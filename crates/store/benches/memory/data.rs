//! Benchmark data: a deterministic generator of varied memories and recall queries,
//! and a deterministic word-hash embedder.

use squidbot_core::memory::Embedder;
use squidbot_core::provider::ProviderError;
use squidbot_types::memory::MemoryType;

/// Dimension of the benchmark embedder, that of small sentence-embedding models.
pub const DIMENSIONS: usize = 384;

/// A small deterministic random generator (xorshift), so every run sees the same data.
pub struct Random(pub u64);

impl Random {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    pub fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }
}

fn list(text: &'static str) -> Vec<&'static str> {
    text.split_whitespace().collect()
}

/// Word lists the memory and query templates draw from.
pub struct Words {
    names: Vec<&'static str>,
    relations: Vec<&'static str>,
    cities: Vec<&'static str>,
    jobs: Vec<&'static str>,
    foods: Vec<&'static str>,
    things: Vec<&'static str>,
    adjectives: Vec<&'static str>,
    activities: Vec<&'static str>,
    topics: Vec<&'static str>,
    tools: Vec<&'static str>,
    pub projects: Vec<&'static str>,
    days: Vec<&'static str>,
    verbs: Vec<&'static str>,
}

impl Words {
    pub fn new() -> Self {
        Self {
            names: list(
                "Ana Bruno Carla Diego Elena Farid Greta Hugo Ines Jonas Kaito Lena Marco Nadia Omar Paula Quentin Rosa \
                 Samir Tara Ugo Vera Walid Xenia Yusuf Zoe Amara Bjorn Chiara Dmitri Esme Felix Giulia Hana Ivan Jana \
                 Karim Lucia Mateo Nora Oskar Priya Rafael Sofia Tomas Uma Viktor Wanda Yara Zeno Aiko Boris Clara",
            ),
            relations: list(
                "sister brother mother father cousin aunt uncle friend colleague neighbour manager partner",
            ),
            cities: list(
                "Porto Lisbon Berlin Munich Paris Lyon Madrid Valencia Rome Milan Vienna Prague Warsaw Oslo Bergen \
                 Stockholm Helsinki Dublin Cork Edinburgh Glasgow Amsterdam Utrecht Brussels Ghent Zurich Geneva \
                 Barcelona Seville Athens Istanbul Cairo Nairobi Lagos Tokyo Osaka Seoul Taipei Hanoi Bangkok Sydney \
                 Melbourne Auckland Toronto Montreal Vancouver Boston Chicago Denver Austin Seattle Lima Bogota",
            ),
            jobs: list(
                "nurse teacher engineer architect pharmacist lawyer chef baker pilot journalist translator designer \
                 accountant electrician plumber carpenter dentist surgeon librarian photographer musician researcher \
                 veterinarian firefighter gardener economist astronomer geologist",
            ),
            foods: list(
                "peanuts shellfish gluten lactose eggs soy sesame strawberries kiwi mustard celery walnuts almonds \
                 cashews shrimp salmon tuna mushrooms garlic onions tomatoes peppers coriander cinnamon chocolate",
            ),
            things: list(
                "laptop bicycle camera piano guitar garden balcony kitchen car scooter tent kayak telescope printer \
                 keyboard monitor headphones backpack umbrella passport wallet notebook calendar thermostat router",
            ),
            adjectives: list(
                "quiet spicy minimal colourful early late short detailed warm cold bright dark formal casual fast \
                 slow cheap expensive reliable simple modern vintage organic local",
            ),
            activities: list(
                "cooking running reading hiking swimming climbing painting writing travelling cycling gardening \
                 sailing skiing dancing knitting fishing camping meditating studying programming",
            ),
            topics: list(
                "budget roadmap migration hiring onboarding security audit release pricing marketing invoices taxes \
                 insurance mortgage vacation wedding renovation conference workshop newsletter backups monitoring",
            ),
            tools: list(
                "Rust Python Postgres SQLite Redis Kafka Docker Kubernetes Terraform Ansible Grafana Prometheus Nginx \
                 React Svelte Django Flask Axum Tokio Git Jenkins Linux FreeBSD Neovim Emacs Figma Notion Obsidian",
            ),
            projects: list(
                "squidbot atlas beacon cobalt delta ember falcon granite harbor iris juniper kestrel lumen meridian \
                 nimbus orchid pioneer quartz raven sierra tundra umbra vortex willow zephyr",
            ),
            days: list("Monday Tuesday Wednesday Thursday Friday Saturday Sunday"),
            verbs: list("renew call email book repair clean update cancel pay order return backup water visit"),
        }
    }

    /// One memory: a template filled with several independent draws, so two memories
    /// rarely share most of their words.
    pub fn memory(&self, random: &mut Random) -> (MemoryType, String) {
        let number = 1 + random.below(9999);
        match random.below(8) {
            0 => (
                MemoryType::Fact,
                format!(
                    "{}'s {} {} lives in {} at number {number} and works as a {} since {}",
                    random.pick(&self.names),
                    random.pick(&self.relations),
                    random.pick(&self.names),
                    random.pick(&self.cities),
                    random.pick(&self.jobs),
                    1950 + random.below(75)
                ),
            ),
            1 => (
                MemoryType::Preference,
                format!(
                    "The user prefers {} {} when {} in {}, ideally around {} minutes",
                    random.pick(&self.adjectives),
                    random.pick(&self.things),
                    random.pick(&self.activities),
                    random.pick(&self.cities),
                    number
                ),
            ),
            2 => (
                MemoryType::Decision,
                format!(
                    "Decided to use {} instead of {} for the {} {} because it is more {}, see ticket {number}",
                    random.pick(&self.tools),
                    random.pick(&self.tools),
                    random.pick(&self.projects),
                    random.pick(&self.topics),
                    random.pick(&self.adjectives)
                ),
            ),
            3 => (
                MemoryType::Event,
                format!(
                    "Meeting with {} about the {} of {} on {} at {}:{:02} in {}, room {number}",
                    random.pick(&self.names),
                    random.pick(&self.topics),
                    random.pick(&self.projects),
                    random.pick(&self.days),
                    7 + random.below(12),
                    random.below(4) * 15,
                    random.pick(&self.cities)
                ),
            ),
            4 => (
                MemoryType::Fact,
                format!(
                    "{} is allergic to {} and avoids {} after {}, noted on visit {number}",
                    random.pick(&self.names),
                    random.pick(&self.foods),
                    random.pick(&self.foods),
                    random.pick(&self.activities)
                ),
            ),
            5 => (
                MemoryType::Todo,
                format!(
                    "Remember to {} the {} and the {} before {}, reference {number}",
                    random.pick(&self.verbs),
                    random.pick(&self.things),
                    random.pick(&self.things),
                    random.pick(&self.days)
                ),
            ),
            6 => (
                MemoryType::Observation,
                format!(
                    "{} seemed {} about {} lately and mentioned the {} {} {number} times",
                    random.pick(&self.names),
                    random.pick(&self.adjectives),
                    random.pick(&self.activities),
                    random.pick(&self.adjectives),
                    random.pick(&self.things)
                ),
            ),
            _ => (
                MemoryType::Identity,
                format!(
                    "{} is a {} from {} who loves {} and {} {}, member {number}",
                    random.pick(&self.names),
                    random.pick(&self.jobs),
                    random.pick(&self.cities),
                    random.pick(&self.activities),
                    random.pick(&self.adjectives),
                    random.pick(&self.foods)
                ),
            ),
        }
    }

    /// A recall query as a user or the agent would phrase it.
    pub fn query(&self, random: &mut Random) -> String {
        match random.below(6) {
            0 => format!("where does {}'s {} live", random.pick(&self.names), random.pick(&self.relations)),
            1 => format!("what is {} allergic to?", random.pick(&self.names)),
            2 => format!("why did we pick {} for {}", random.pick(&self.tools), random.pick(&self.projects)),
            3 => {
                format!("when is the meeting about the {} with {}", random.pick(&self.topics), random.pick(&self.names))
            }
            4 => format!("what does the user like when {}", random.pick(&self.activities)),
            _ => format!("{} {} {}", random.pick(&self.things), random.pick(&self.verbs), random.pick(&self.days)),
        }
    }
}

/// A deterministic stand-in for an embedding model: every word adds a fixed
/// pseudo-random direction, so texts sharing words get close vectors.
pub struct WordEmbedder;

impl WordEmbedder {
    pub fn vector(text: &str) -> Vec<f32> {
        let mut vector = vec![0.0_f32; DIMENSIONS];
        for word in text.split(|character: char| !character.is_alphanumeric()).filter(|word| !word.is_empty()) {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for byte in word.to_lowercase().bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
            let mut random = Random(hash | 1);
            for value in &mut vector {
                // Uniform in [-1, 1): a centred random direction per word.
                *value += (random.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
            }
        }
        let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
        vector.iter_mut().for_each(|value| *value /= norm);
        vector
    }
}

impl Embedder for WordEmbedder {
    fn model(&self) -> &str {
        "bench/word-hash-384"
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> impl Future<Output = Result<Vec<Vec<f32>>, ProviderError>> + Send + 'a {
        std::future::ready(Ok(texts.iter().map(|text| Self::vector(text)).collect()))
    }
}
