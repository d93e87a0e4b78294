//! The `tensorfit` command line: parses the arguments and runs the subcommand (each in
//! its own module under `cli/`). With no subcommand it trains the seed network on the
//! built-in task with the defaults of `tensorfit train`.
//!
//! Exit status: 0 success, 1 an error (bad input, a file, a device; the message says
//! which), 2 `plan` found nothing that fits.

#[macro_use]
mod cli;

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use cli::{
    bench, eval, generate, import, info, plan, predict, train, training_file, CapArgs, Exit,
    ModelArg,
};

#[derive(Parser, Debug)]
#[command(
    name = "tensorfit",
    version,
    about = "Train and run a stacked LSTM on the device it fits on, decided before it runs."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train on the built-in temporal-order task (the default command).
    Train(train::TrainArgs),
    /// Evaluate a model on held-out sequences of the built-in task.
    Eval(eval::EvalArgs),
    /// Run a trained model on your own inputs.
    Predict(predict::PredictArgs),
    /// Write text with a character-level language model, streaming each character as it
    /// is sampled.
    Generate(generate::GenerateArgs),
    /// Show the memory plan of a job on every device, and the choice.
    Plan(plan::PlanArgs),
    /// Time training steps or inference on the chosen device (median after a warm-up).
    Bench(bench::BenchArgs),
    /// List the devices, their memory and why any is unavailable.
    Devices {
        #[command(flatten)]
        caps: CapArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a model: its description, training settings and tensors (PyTorch names,
    /// shapes, counts).
    Model {
        /// A preset (seed) or a model description file.
        #[arg(long, value_name = "seed|FILE.toml", value_parser = ModelArg::parse, default_value = "seed")]
        model: ModelArg,
        /// Print JSON instead of TOML and a table.
        #[arg(long)]
        json: bool,
    },
    /// Make a checkpoint from a PyTorch state dict (safetensors) of a model.
    Import(import::ImportArgs),
}

/// The command line's subcommand; a bare `tensorfit` is `tensorfit train`. Training also
/// learns which of its flags were typed (a resumed run refuses typed values that differ
/// from the run's own).
fn parse() -> Result<Command, clap::Error> {
    let matches = Cli::command().try_get_matches()?;
    let (mut command, train_matches) = match Cli::from_arg_matches(&matches)?.command {
        Some(c) => (c, matches.subcommand_matches("train").cloned()),
        None => {
            let m = train::TrainArgs::augment_args(clap::Command::new("train"))
                .try_get_matches_from(["train"])?;
            (
                Command::Train(train::TrainArgs::from_arg_matches(&m)?),
                Some(m),
            )
        }
    };
    if let (Command::Train(a), Some(m)) = (&mut command, train_matches) {
        a.given = typed_flags(&m);
        // What follows `train`, parsed again under a model file's `[training]` settings.
        if matches.subcommand_name() == Some("train") {
            a.argv = std::env::args_os().skip(2).collect();
        }
    }
    if let (Command::Plan(a), Some(m)) = (&mut command, matches.subcommand_matches("plan")) {
        a.typed = training_file::Typed {
            given: typed_flags(m),
            argv: std::env::args_os().skip(2).collect(),
        };
    }
    Ok(command)
}

/// The ids of the arguments given on the command line (not defaulted).
fn typed_flags(m: &ArgMatches) -> Vec<String> {
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect()
}

fn main() {
    tensorfit::quiet_mesa();
    let command = match parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version print to stdout and succeed; a bad flag is bad input.
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 1 } else { 0 });
        }
    };
    let exit = match command {
        Command::Train(a) => train::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Predict(a) => predict::run(a),
        Command::Generate(a) => generate::run(a),
        Command::Plan(a) => plan::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Devices { caps, json } => info::devices(&caps, json),
        Command::Model { model, json } => info::model(&model, json),
        Command::Import(a) => import::run(a),
    };
    match exit {
        Ok(Exit::Success) => {}
        Ok(other) => std::process::exit(other.code()),
        Err(e) if e.is::<cli::Said>() => std::process::exit(1),
        Err(e) => {
            errln!("error: {}", cli::error_text(&e));
            std::process::exit(1);
        }
    }
}
