#pragma once

#include <cstddef>

#include "base/check.h"

namespace stalkd {

// A node of an intrusive doubly-linked list. A type joins a list by deriving from
// ListNode<Tag>; the tag tells apart several lists a type can be in at once.
template <typename Tag>
struct ListNode {
  ListNode* prev = nullptr;
  ListNode* next = nullptr;
  bool linked() const { return prev != nullptr; }
};

// Non-owning list of T (which derives from ListNode<Tag>). O(1) push, remove and front.
template <typename T, typename Tag>
class IntrusiveList {
  using Node = ListNode<Tag>;

 public:
  IntrusiveList() { head_.prev = head_.next = &head_; }
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;

  bool empty() const { return head_.next == &head_; }
  size_t size() const { return size_; }
  T* front() const { return empty() ? nullptr : Cast(head_.next); }
  T* back() const { return empty() ? nullptr : Cast(head_.prev); }
  // x's neighbours in the list (nullptr at its ends); x must be in this list.
  T* Next(const T* x) const {
    const Node* n = static_cast<const Node*>(x)->next;
    return n == &head_ ? nullptr : Cast(const_cast<Node*>(n));
  }
  T* Prev(const T* x) const {
    const Node* n = static_cast<const Node*>(x)->prev;
    return n == &head_ ? nullptr : Cast(const_cast<Node*>(n));
  }

  void PushBack(T* x) {
    Node* n = x;
    STALKD_DCHECK(!n->linked());
    n->prev = head_.prev;
    n->next = &head_;
    head_.prev->next = n;
    head_.prev = n;
    size_++;
  }

  // Links x just before `before` (in this list), or at the end if before is null.
  void InsertBefore(T* x, T* before) {
    Node* n = x;
    STALKD_DCHECK(!n->linked());
    Node* b = before ? static_cast<Node*>(before) : &head_;
    n->prev = b->prev;
    n->next = b;
    b->prev->next = n;
    b->prev = n;
    size_++;
  }

  void Remove(T* x) {
    Node* n = x;
    STALKD_DCHECK(n->linked());
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = nullptr;
    size_--;
  }

  class Iterator {
   public:
    explicit Iterator(const Node* n) : n_(n) {}
    T* operator*() const { return Cast(const_cast<Node*>(n_)); }
    Iterator& operator++() {
      n_ = n_->next;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return n_ != o.n_; }

   private:
    const Node* n_;
  };
  Iterator begin() const { return Iterator(head_.next); }
  Iterator end() const { return Iterator(&head_); }

 private:
  static T* Cast(Node* n) { return static_cast<T*>(n); }
  Node head_;
  size_t size_ = 0;
};

}  // namespace stalkd
