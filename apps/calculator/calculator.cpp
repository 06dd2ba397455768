// rdmactor-calculator: CAF's classic distributed calculator, over rdmactor.
//
// A typed calculator actor (add, sub, mul, div on 64-bit integers) is
// published under a name on a node; a client connects, looks it up as a
// typed handle and evaluates expressions with request/response, as CAF io's
// example does with `publish(actor, port)` and `remote_actor<T>(host,
// port)`.  The only rdmactor-specific lines are marked "rdmactor:".
//
//   rdmactor-calculator --serve=HOST:PORT      until SIGINT/SIGTERM
//   rdmactor-calculator --connect=HOST:PORT --expr="3 + 4" [--expr=...]
//   rdmactor-calculator --connect=HOST:PORT    expressions from stdin
//
// The client prints "3 + 4 = 7" per expression, or the expression and the
// error (the calculator's own caf::error, or the library's: unknown_actor,
// peer_gone, ...).  Exit status: 0 when every expression was evaluated,
// 1 when one failed or the calculator could not be reached, 2 for a usage
// error.  Only the installed API is used (<rdmactor/...>, CAF, std).

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <pthread.h>

#include <caf/actor_cast.hpp>
#include <caf/actor_ostream.hpp>
#include <caf/actor_system.hpp>
#include <caf/after.hpp>
#include <caf/config_option_adder.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/result.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <rdmactor/rdmactor.hpp>

namespace {

// -- the calculator's interface (shared by server and client) -----------------

using add_atom = caf::atom_constant<caf::atom("add")>;
using sub_atom = caf::atom_constant<caf::atom("sub")>;
using mul_atom = caf::atom_constant<caf::atom("mul")>;
using div_atom = caf::atom_constant<caf::atom("div")>;

/// The typed interface the server publishes and the client looks up.  Atoms
/// and integers are CAF builtins: no `add_message_type` needed (a struct in
/// a message would need one, in both processes, as with CAF io).
using calculator = caf::typed_actor<
    caf::replies_to<add_atom, int64_t, int64_t>::with<int64_t>,
    caf::replies_to<sub_atom, int64_t, int64_t>::with<int64_t>,
    caf::replies_to<mul_atom, int64_t, int64_t>::with<int64_t>,
    caf::replies_to<div_atom, int64_t, int64_t>::with<int64_t>>;

/// The remote actor's own errors travel to the client as caf::errors (code,
/// category and text); this sample uses the library's category.
caf::error overflow(const char* op) {
  return rdmactor::make_error(rdmactor::errc::invalid_argument,
                              std::string{"overflow: the result of "} + op
                                  + " does not fit in 64 bits");
}

calculator::behavior_type calculator_impl() {
  return {
      [](add_atom, int64_t a, int64_t b) -> caf::result<int64_t> {
        int64_t r;
        if (__builtin_add_overflow(a, b, &r))
          return overflow("+");
        return r;
      },
      [](sub_atom, int64_t a, int64_t b) -> caf::result<int64_t> {
        int64_t r;
        if (__builtin_sub_overflow(a, b, &r))
          return overflow("-");
        return r;
      },
      [](mul_atom, int64_t a, int64_t b) -> caf::result<int64_t> {
        int64_t r;
        if (__builtin_mul_overflow(a, b, &r))
          return overflow("*");
        return r;
      },
      [](div_atom, int64_t a, int64_t b) -> caf::result<int64_t> {
        if (b == 0)
          return rdmactor::make_error(rdmactor::errc::invalid_argument,
                                      "division by zero");
        if (a == INT64_MIN && b == -1)
          return overflow("/");
        return a / b;
      },
  };
}

// -- expressions --------------------------------------------------------------

/// `LHS OP RHS`: two decimal integers and one of + - * /.
struct expression {
  int64_t lhs = 0;
  char op = '+';
  int64_t rhs = 0;
};

/// Reads an integer at `*pos` (after blanks); advances `*pos` past it.
std::optional<int64_t> read_int(const std::string& s, size_t* pos) {
  while (*pos < s.size() && (s[*pos] == ' ' || s[*pos] == '\t'))
    ++*pos;
  int64_t x = 0;
  auto first = s.data() + *pos;
  auto last = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(first, last, x);
  if (ec != std::errc{} || ptr == first)
    return std::nullopt;
  *pos = static_cast<size_t>(ptr - s.data());
  return x;
}

/// Parses "3 + 4", "-2*7", "10 / -3"; nullopt for anything else.
std::optional<expression> parse(const std::string& s) {
  expression e;
  size_t pos = 0;
  auto lhs = read_int(s, &pos);
  if (!lhs)
    return std::nullopt;
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t'))
    ++pos;
  if (pos == s.size() || std::strchr("+-*/", s[pos]) == nullptr)
    return std::nullopt;
  e.op = s[pos++];
  auto rhs = read_int(s, &pos);
  if (!rhs)
    return std::nullopt;
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\r'))
    ++pos;
  if (pos != s.size())
    return std::nullopt;
  e.lhs = *lhs;
  e.rhs = *rhs;
  return e;
}

// -- configuration ------------------------------------------------------------

class calculator_config : public rdmactor::config {
public:
  std::string serve;
  std::string connect;
  std::string name = "calculator";
  std::string fabric;
  std::string expr_help; // --expr is taken from argv before parse (below)

  calculator_config() {
    caf::config_option_adder{custom_options_, "global"}
        .add(serve, "serve",
             "publish the calculator and serve on HOST:PORT (port 0: any) "
             "until SIGINT/SIGTERM")
        .add(connect, "connect", "look the calculator up at HOST:PORT")
        .add(name, "name", "the name it is published under (calculator)")
        .add(fabric, "fabric", "soft or verbs (default: rdmactor.fabric)")
        .add(expr_help, "expr",
             "client: evaluate \"LHS OP RHS\" (OP: + - * /); repeatable; "
             "without it, one expression per line of stdin");
  }
};

/// Removes every `--expr=X` (or `--expr X`) from argv and returns the X.
/// CAF 0.17 keeps only the last of a repeated option.
std::vector<std::string> take_exprs(int& argc, char** argv) {
  std::vector<std::string> out;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--expr=", 0) == 0) {
      out.push_back(arg.substr(7));
    } else if (arg == "--expr" && i + 1 < argc) {
      out.emplace_back(argv[++i]);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return out;
}

// -- server -------------------------------------------------------------------

struct acceptor_state {
  /// rdmactor: a connection lives as long as a handle to it; keep each one
  /// until it ends (the down message carries why: peer_closed, peer_gone).
  std::vector<rdmactor::connection_actor> connections;
  static inline const char* name = "calculator.acceptor";
};

caf::behavior acceptor_impl(caf::stateful_actor<acceptor_state>* self) {
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& cs = self->state.connections;
    for (auto i = cs.begin(); i != cs.end(); ++i) {
      if (i->address() == dm.source) {
        cs.erase(i);
        caf::aout(self) << "client left (" << rdmactor::render(dm.reason)
                        << "), " << cs.size() << " connected" << std::endl;
        return;
      }
    }
  });
  return {
      [self](rdmactor::accepted_atom, rdmactor::connection_actor& conn) {
        self->monitor(conn);
        self->state.connections.push_back(std::move(conn));
        caf::aout(self) << "client connected, "
                        << self->state.connections.size() << " connected"
                        << std::endl;
      },
  };
}

int run_server(caf::actor_system& sys, rdmactor::node& nd,
               const calculator_config& cfg, sigset_t stop_signals) {
  auto calc = sys.spawn(calculator_impl);
  // rdmactor: publish by name on the node (every connection can look it
  // up), then listen; CAF io: `sys.middleman().publish(calc, port)`.
  if (auto r = nd.publish(cfg.name, calc); !r) {
    std::cerr << "rdmactor-calculator: " << rdmactor::render(r.error()) << "\n";
    return 1;
  }
  auto acceptor = sys.spawn(acceptor_impl);
  auto port = nd.listen(cfg.serve, acceptor);
  if (!port) {
    std::cerr << "rdmactor-calculator: " << rdmactor::render(port.error())
              << "\n";
    caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(calc, caf::exit_reason::user_shutdown);
    return 1;
  }
  std::cout << "calculator published as \"" << cfg.name
            << "\", serving on port " << *port << " (" << nd.device()->kind()
            << "); SIGINT or SIGTERM stops" << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cout << "shutting down (" << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << ")" << std::endl;
  nd.close(); // clients see peer_closed
  caf::anon_send_exit(acceptor, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(calc, caf::exit_reason::user_shutdown);
  return 0;
}

// -- client -------------------------------------------------------------------

/// Whether `err` means that the calculator (or the connection) is gone.
bool is_gone(const caf::error& err) {
  using rdmactor::errc;
  auto code = rdmactor::code_of(err);
  return code == errc::peer_gone || code == errc::peer_closed
         || code == errc::closed
         || (err.category() == caf::atom("system")
             && err.code()
                    == static_cast<uint8_t>(caf::sec::request_receiver_down));
}

/// Evaluates `line` on `calc`; prints the result or the error.  Returns
/// false on an error; sets `*gone` when the calculator is unreachable.
bool evaluate(caf::scoped_actor& self, const calculator& calc,
              const std::string& line, std::chrono::milliseconds timeout,
              bool* gone) {
  auto e = parse(line);
  if (!e) {
    std::cerr << line << ": cannot read it: expected LHS OP RHS, two "
              << "64-bit integers and OP one of + - * /" << std::endl;
    return false;
  }
  bool ok = false;
  auto on_value = [&](int64_t r) {
    std::cout << e->lhs << ' ' << e->op << ' ' << e->rhs << " = " << r
              << std::endl;
    ok = true;
  };
  auto on_error = [&](caf::error& err) {
    *gone = is_gone(err);
    std::cerr << e->lhs << ' ' << e->op << ' ' << e->rhs << ": "
              << rdmactor::render(err) << std::endl;
  };
  // As with a local typed actor: request(...).receive(value, error).
  switch (e->op) {
    case '+':
      self->request(calc, timeout, add_atom::value, e->lhs, e->rhs)
          .receive(on_value, on_error);
      break;
    case '-':
      self->request(calc, timeout, sub_atom::value, e->lhs, e->rhs)
          .receive(on_value, on_error);
      break;
    case '*':
      self->request(calc, timeout, mul_atom::value, e->lhs, e->rhs)
          .receive(on_value, on_error);
      break;
    default:
      self->request(calc, timeout, div_atom::value, e->lhs, e->rhs)
          .receive(on_value, on_error);
  }
  return ok;
}

int run_client(caf::actor_system& sys, rdmactor::node& nd,
               const calculator_config& cfg,
               const std::vector<std::string>& exprs) {
  auto fail = [](const caf::error& err) {
    std::cerr << "rdmactor-calculator: " << rdmactor::render(err) << std::endl;
    return 1;
  };
  // rdmactor: connect to the node, then look the actor up by name, checked
  // against the typed interface; CAF io: `remote_actor<calculator>(host,
  // port)`.
  auto conn = nd.connect(cfg.connect);
  if (!conn)
    return fail(conn.error());
  auto timeout = std::chrono::milliseconds(nd.opts().request_timeout_ms);
  caf::scoped_actor self{sys};
  calculator calc;
  caf::error lookup_error;
  self->request(*conn, timeout, rdmactor::lookup_atom::value, cfg.name,
                rdmactor::interface_of<calculator>(sys))
      .receive(
          [&](caf::actor& proxy) {
            calc = caf::actor_cast<calculator>(std::move(proxy));
          },
          [&](caf::error& err) { lookup_error = std::move(err); });
  if (lookup_error)
    return fail(lookup_error);
  // From here on, `calc` is used exactly as a local typed actor.
  self->monitor(calc);
  int rc = 0;
  bool gone = false;
  auto run = [&](const std::string& line) {
    if (!evaluate(self, calc, line, timeout, &gone))
      rc = 1;
    return !gone;
  };
  if (!exprs.empty()) {
    for (auto& x : exprs)
      if (!run(x))
        break;
  } else {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos)
        continue;
      if (line == "quit")
        break;
      if (!run(line))
        break;
    }
  }
  if (gone) {
    // The proxy quit with CAF's remote_link_unreachable, as with CAF io;
    // rdmactor's cause says why (peer_gone, peer_closed).
    self->receive(
        [&](caf::down_msg& dm) {
          std::cerr << "rdmactor-calculator: the calculator is gone: "
                    << rdmactor::render(rdmactor::cause_of(dm.reason))
                    << std::endl;
        },
        caf::after(timeout) >> [] {});
  }
  return rc;
}

} // namespace

int main(int argc, char** argv) {
  auto exprs = take_exprs(argc, argv);
  bool log_level_given = false;
  for (int i = 1; i < argc; ++i)
    log_level_given |= std::strncmp(argv[i], "--rdmactor.log-level", 20) == 0;
  calculator_config cfg;
  if (auto err
      = cfg.parse(argc, argv, rdmactor::default_config_file().c_str())) {
    std::cerr << "rdmactor-calculator: " << cfg.render(err) << "\n"
              << "run rdmactor-calculator --help for the options\n";
    return 2;
  }
  if (cfg.cli_helptext_printed) {
    std::cout << "\n" << cfg.rdmactor_help();
    std::cout << "\nThe server publishes a typed calculator actor (add, sub, "
                 "mul, div on 64-bit\nintegers) under --name; the client "
                 "looks it up and prints \"LHS OP RHS = R\" per\nexpression, "
                 "or the expression and the error. Exit status: 0 when every\n"
                 "expression was evaluated, 1 otherwise, 2 for a usage "
                 "error. Every rdmactor.*\noption can be given as "
                 "--rdmactor.NAME=VALUE.\n";
    return 0;
  }
  if (cfg.serve.empty() == cfg.connect.empty()) {
    std::cerr << "rdmactor-calculator: give exactly one of --serve and "
                 "--connect (see --help)\n";
    return 2;
  }
  if (!cfg.serve.empty() && !exprs.empty()) {
    std::cerr << "rdmactor-calculator: --expr is for --connect\n";
    return 2;
  }
  auto opts = cfg.opts;
  if (!cfg.fabric.empty())
    opts.fabric = cfg.fabric;
  // A client prints results: only warnings from the library, unless told.
  if (!cfg.connect.empty() && !log_level_given)
    opts.log_level = "warn";
  // The server waits for SIGINT/SIGTERM with sigwait: block them before the
  // actor system starts its threads, which inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (!cfg.serve.empty())
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  caf::actor_system sys{cfg};
  // rdmactor: open a node on the fabric (CAF io: load the middleman).
  auto nd = rdmactor::node::open(sys, opts);
  if (!nd) {
    std::cerr << "rdmactor-calculator: " << rdmactor::render(nd.error())
              << std::endl;
    return 1;
  }
  auto rc = cfg.serve.empty() ? run_client(sys, **nd, cfg, exprs)
                              : run_server(sys, **nd, cfg, stop_signals);
  (*nd)->close();
  return rc;
}
