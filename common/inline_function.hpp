#pragma once

// A `std::function` whose callable lives inside the object up to a fixed
// size: the data path's completions (request_table::completion_fn) capture
// a few pointers and a length, which libstdc++'s std::function puts on the
// heap (it keeps only trivially copyable callables of at most 16 bytes
// inside).  Not installed.

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace rdmactor {

template <class Signature, size_t Capacity = 48>
class inline_function;

namespace detail {

template <class T>
struct is_std_function : std::false_type {};

template <class Signature>
struct is_std_function<std::function<Signature>> : std::true_type {};

} // namespace detail

/// A copyable type-erased callable, like `std::function<R(Args...)>`,
/// that stores callables of at most `Capacity` bytes (and no stricter
/// alignment than `std::max_align_t`, nothrow-movable) in place and larger
/// ones on the heap.  Moving one moves its callable; a moved-from one is
/// empty.  Calling an empty one throws `std::bad_function_call`.
template <class R, class... Args, size_t Capacity>
class inline_function<R(Args...), Capacity> {
public:
  inline_function() noexcept = default;

  inline_function(std::nullptr_t) noexcept {}

  template <
      class F, class D = std::decay_t<F>,
      class = std::enable_if_t<
          !std::is_same_v<
              D, inline_function> && std::is_invocable_r_v<R, D&, Args...>>>
  inline_function(F&& f) {
    static_assert(std::is_copy_constructible_v<D>,
                  "an inline_function's callable must be copyable, as a "
                  "std::function's");
    // Empty as what it was made from: a null pointer, an empty
    // std::function.
    if constexpr (
        std::is_pointer_v<
            D> || std::is_member_pointer_v<D> || detail::is_std_function<D>::value) {
      if (f == nullptr)
        return;
    }
    if constexpr (stored_in_place<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      ops_ = &in_place_ops<D>;
    } else {
      ::new (static_cast<void*>(buf_)) D*(new D(std::forward<F>(f)));
      ops_ = &boxed_ops<D>;
    }
  }

  inline_function(const inline_function& other) {
    if (other.ops_ != nullptr) {
      other.ops_->copy(buf_, other.buf_);
      ops_ = other.ops_;
    }
  }

  inline_function(inline_function&& other) noexcept {
    take(other);
  }

  inline_function& operator=(const inline_function& other) {
    if (this != &other)
      *this = inline_function{other};
    return *this;
  }

  inline_function& operator=(inline_function&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }

  inline_function& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }

  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, inline_function>>>
  inline_function& operator=(F&& f) {
    return *this = inline_function{std::forward<F>(f)};
  }

  ~inline_function() {
    reset();
  }

  explicit operator bool() const noexcept {
    return ops_ != nullptr;
  }

  R operator()(Args... args) const {
    if (ops_ == nullptr)
      throw std::bad_function_call{};
    return ops_->invoke(const_cast<unsigned char*>(buf_),
                        std::forward<Args>(args)...);
  }

  /// Whether a callable of type `F` is stored in place (no allocation).
  template <class F>
  static constexpr bool stored_in_place
      = sizeof(F) <= Capacity && alignof(F) <= alignof(std::max_align_t)
        && std::is_nothrow_move_constructible_v<F>;

  friend bool operator==(const inline_function& f, std::nullptr_t) noexcept {
    return !f;
  }
  friend bool operator!=(const inline_function& f, std::nullptr_t) noexcept {
    return static_cast<bool>(f);
  }

private:
  struct ops {
    R (*invoke)(void* self, Args&&... args);
    void (*copy)(void* dst, const void* src);
    /// Moves the callable from `src` to `dst` and destroys `src`'s.
    void (*move)(void* dst, void* src) noexcept;
    void (*destroy)(void* self) noexcept;
  };

  template <class D>
  static constexpr ops in_place_ops{
      [](void* self, Args&&... args) -> R {
        return (*static_cast<D*>(self))(std::forward<Args>(args)...);
      },
      [](void* dst, const void* src) {
        ::new (dst) D(*static_cast<const D*>(src));
      },
      [](void* dst, void* src) noexcept {
        ::new (dst) D(std::move(*static_cast<D*>(src)));
        static_cast<D*>(src)->~D();
      },
      [](void* self) noexcept { static_cast<D*>(self)->~D(); }};

  template <class D>
  static constexpr ops boxed_ops{
      [](void* self, Args&&... args) -> R {
        return (**static_cast<D**>(self))(std::forward<Args>(args)...);
      },
      [](void* dst, const void* src) {
        ::new (dst) D*(new D(**static_cast<D* const*>(src)));
      },
      [](void* dst, void* src) noexcept {
        ::new (dst) D*(*static_cast<D**>(src));
      },
      [](void* self) noexcept { delete *static_cast<D**>(self); }};

  void take(inline_function& other) noexcept {
    if (other.ops_ != nullptr) {
      other.ops_->move(buf_, other.buf_);
      ops_ = other.ops_;
      other.ops_ = nullptr;
    }
  }

  void reset() noexcept {
    if (ops_ != nullptr) {
      auto* o = ops_;
      ops_ = nullptr;
      o->destroy(buf_);
    }
  }

  alignas(std::max_align_t) unsigned char buf_[Capacity];
  const ops* ops_ = nullptr;
};

} // namespace rdmactor
