#pragma once

// A double-ended queue in one ring buffer that only grows: the data path's
// queues (the link's posts and operations in flight, the soft fabric's
// frames, receives and completions) push and pop an element per
// operation, and std::deque allocates a node every few of those (every
// one for elements over 512 bytes).  Not installed.

#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>

namespace rdmactor {

/// A FIFO with `push_front`, in a power-of-two ring that allocates nothing
/// until the first push (`first_capacity`), doubles when full and never
/// shrinks (`clear` keeps it): once it held the most
/// elements it will hold, pushing and popping allocate nothing.
/// Single-threaded.
template <class T>
class ring_deque {
public:
  ring_deque() = default;

  ring_deque(ring_deque&& other) noexcept
      : buf_(std::move(other.buf_)), cap_(other.cap_), head_(other.head_),
        size_(other.size_) {
    other.cap_ = other.head_ = other.size_ = 0;
  }

  ring_deque& operator=(ring_deque&& other) noexcept {
    if (this != &other) {
      clear();
      buf_ = std::move(other.buf_);
      cap_ = other.cap_;
      head_ = other.head_;
      size_ = other.size_;
      other.cap_ = other.head_ = other.size_ = 0;
    }
    return *this;
  }

  ring_deque(const ring_deque&) = delete;
  ring_deque& operator=(const ring_deque&) = delete;

  ~ring_deque() {
    clear();
  }

  bool empty() const noexcept {
    return size_ == 0;
  }

  size_t size() const noexcept {
    return size_;
  }

  /// Elements it holds without growing.
  size_t capacity() const noexcept {
    return cap_;
  }

  T& operator[](size_t i) noexcept {
    return *slot(i);
  }
  const T& operator[](size_t i) const noexcept {
    return *slot(i);
  }

  T& front() noexcept {
    return *slot(0);
  }
  const T& front() const noexcept {
    return *slot(0);
  }
  T& back() noexcept {
    return *slot(size_ - 1);
  }
  const T& back() const noexcept {
    return *slot(size_ - 1);
  }

  template <class... Ts>
  T& emplace_back(Ts&&... xs) {
    grow_if_full();
    auto* p
        = ::new (static_cast<void*>(slot(size_))) T(std::forward<Ts>(xs)...);
    ++size_;
    return *p;
  }

  void push_back(T x) {
    emplace_back(std::move(x));
  }

  void push_front(T x) {
    grow_if_full();
    auto h = (head_ + cap_ - 1) & (cap_ - 1);
    ::new (static_cast<void*>(raw(h))) T(std::move(x));
    head_ = h;
    ++size_;
  }

  void pop_front() noexcept {
    slot(0)->~T();
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }

  /// Removes the element at `i` (< size()); the later ones move up one
  /// place (O(size - i)).
  void erase_at(size_t i) noexcept {
    for (; i + 1 < size_; ++i)
      *slot(i) = std::move(*slot(i + 1));
    slot(size_ - 1)->~T();
    --size_;
  }

  /// Destroys every element; keeps the capacity.
  void clear() noexcept {
    while (size_ > 0)
      pop_front();
    head_ = 0;
  }

  /// Iterates front to back.
  template <class Ref, class Owner>
  class basic_iterator {
  public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = std::remove_reference_t<Ref>*;
    using reference = Ref;

    basic_iterator(Owner* q, size_t i) noexcept : q_(q), i_(i) {}
    Ref operator*() const noexcept {
      return (*q_)[i_];
    }
    pointer operator->() const noexcept {
      return &(*q_)[i_];
    }
    /// The element's place from the front.
    size_t index() const noexcept {
      return i_;
    }
    basic_iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    bool operator!=(const basic_iterator& other) const noexcept {
      return i_ != other.i_;
    }
    bool operator==(const basic_iterator& other) const noexcept {
      return i_ == other.i_;
    }

  private:
    Owner* q_;
    size_t i_;
  };

  using iterator = basic_iterator<T&, ring_deque>;
  using const_iterator = basic_iterator<const T&, const ring_deque>;

  iterator begin() noexcept {
    return {this, 0};
  }
  iterator end() noexcept {
    return {this, size_};
  }
  const_iterator begin() const noexcept {
    return {this, 0};
  }
  const_iterator end() const noexcept {
    return {this, size_};
  }

private:
  using storage = std::aligned_storage_t<sizeof(T), alignof(T)>;

  /// The first allocation: 8 elements, or as many as fit in 256 bytes (at
  /// least one) when they are larger, so that the queues of an idle
  /// connection that saw a single operation stay small.
  static constexpr size_t first_capacity = [] {
    size_t n = 8;
    while (n > 1 && n * sizeof(T) > 256)
      n /= 2;
    return n;
  }();

  T* raw(size_t pos) const noexcept {
    return reinterpret_cast<T*>(buf_.get() + pos);
  }

  T* slot(size_t i) const noexcept {
    return raw((head_ + i) & (cap_ - 1));
  }

  void grow_if_full() {
    if (size_ < cap_)
      return;
    auto cap = cap_ == 0 ? first_capacity : 2 * cap_;
    std::unique_ptr<storage[]> buf{new storage[cap]};
    for (size_t i = 0; i < size_; ++i) {
      auto* from = slot(i);
      ::new (static_cast<void*>(reinterpret_cast<T*>(buf.get() + i)))
          T(std::move(*from));
      from->~T();
    }
    buf_ = std::move(buf);
    cap_ = cap;
    head_ = 0;
  }

  std::unique_ptr<storage[]> buf_;
  size_t cap_ = 0;
  size_t head_ = 0;
  size_t size_ = 0;
};

} // namespace rdmactor
